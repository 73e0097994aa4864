package splice

import "github.com/qsplice/qsplice/splice/wire"

// Which SYNs the link answers (FrontEndConfig.LinkAnswersSYNs; the
// program: splice/link/synanswer.go). Normally the engine sees only
// the SYNs the program passed on (the link reads after tc ingress,
// frontend/synhide.go) and answers them all. When it reads every
// protocol (with -timeline), the engine sees each SYN the
// program saw, and must know whether the program answered it: one it
// takes for answered that was not would get no SYN-ACK until the
// client's retransmission a second later; one answered by both gets two
// SYN-ACKs with the same cookie, the TSval's clock aside (harmless: the
// client ACKs the second as a duplicate; but a frame for nothing).
// So the rule here is the program's, clause for clause, and a test runs
// both on the same frames (fe_linksyn_link_test.go).
//
// The rule is asked (judgeSYN) of a SYN that passed the ingress checks
// (ingress.go, which the program makes too), to a VIP and port that
// listen, with options that parse; before the limits and the flow table,
// which the program knows nothing of: a SYN it answered is answered,
// whatever the engine would have made of it. Then the program answered
// it if
//
//   - it is SYN alone (no FIN either; the engine answers SYN+FIN);
//   - its IPv4 header starts right after an untagged Ethernet header and
//     has no options, and the frame ends where IPv4 says;
//   - it has no payload, and its options are exactly as long as the
//     SYN-ACK's will be, so the program writes the answer over it
//     without moving a byte;
//   - its options are laid out as Linux lays them out, which is also how
//     the SYN-ACK's are: MSS first, then timestamps or SACK-permitted,
//     then window scale, each in its place (linuxLayout). The program
//     reads them at constant offsets: an eBPF program may add a variable
//     to a packet pointer only with CAP_PERFMON, which the front-end does
//     not have. Fast Open, SACK blocks, another order or padding: the
//     engine's.
//
// One difference is deliberate: the program does not verify the TCP
// checksum (on a veth a local sender's frame has only a partial one). It
// rewrites the header incrementally, so a wrongly summed SYN gets a
// SYN-ACK with the same error, which the client drops; the engine drops
// such a SYN before it gets here.

// linkAnswersSYN reports whether the link's program answered the SYN p,
// whose options o are parsed.
func linkAnswersSYN(p *wire.Packet, o *wire.TCPOptions) bool {
	t := p.TCP
	if t.Flags()&(wire.TCPFlagFIN|wire.TCPFlagSYN|wire.TCPFlagRST|wire.TCPFlagACK) != wire.TCPFlagSYN {
		return false
	}
	if p.L3 != wire.EthernetHeaderLen || p.IP.HeaderLen() != wire.IPv4MinHeaderLen {
		return false
	}
	// The SYN-ACK's options (handleSYN: wire.SynOptions.Encode): MSS,
	// then timestamps (SACK-permitted in their padding) or SACK-permitted,
	// then the window scale.
	answer := 4
	switch {
	case o.HasTS:
		answer += 12
	case o.SACKPermitted:
		answer += 4
	}
	if o.HasWScale {
		answer += 4
	}
	ipLen := p.IP.TotalLen()
	if len(p.Eth) != wire.EthernetHeaderLen+ipLen ||
		ipLen != wire.IPv4MinHeaderLen+wire.TCPMinHeaderLen+answer ||
		t.HeaderLen() != wire.TCPMinHeaderLen+answer {
		return false
	}
	return linuxLayout(t, o)
}

// linuxLayout reports whether t's options are laid out as Linux lays
// them out for what o says they offer, and as the SYN-ACK's are
// (wire.SynOptions.Encode): MSS; then SACK-permitted (or NOP NOP) and
// timestamps, or NOP NOP SACK-permitted; then NOP and window scale. The
// program matches the kinds and lengths at these places and takes the
// values as they are, so the values are not compared here either.
func linuxLayout(t wire.TCP, o *wire.TCPOptions) bool {
	b := t[wire.TCPMinHeaderLen:t.HeaderLen()]
	if !o.HasMSS || b[0] != wire.OptMSS || b[1] != 4 {
		return false
	}
	i := 4
	switch {
	case o.HasTS:
		first := [2]byte{wire.OptNOP, wire.OptNOP}
		if o.SACKPermitted {
			first = [2]byte{wire.OptSACKPermitted, 2}
		}
		if [4]byte(b[i:i+4]) != [4]byte{first[0], first[1], wire.OptTimestamps, 10} {
			return false
		}
		i += 12
	case o.SACKPermitted:
		if [4]byte(b[i:i+4]) != [4]byte{wire.OptNOP, wire.OptNOP, wire.OptSACKPermitted, 2} {
			return false
		}
		i += 4
	}
	if o.HasWScale && [3]byte(b[i:i+3]) != [3]byte{wire.OptNOP, wire.OptWScale, 3} {
		return false
	}
	return true
}

// synVerdict is what InputVNet learned of a client's SYN before it
// hands it on (judgeSYN): whether its options are parsed, in e.opts,
// where nothing between InputVNet and handleSYN parses another segment's,
// and whether the link answered it. It is passed along so that handleSYN
// neither parses the options again nor asks the link's rule twice.
type synVerdict uint8

const (
	synUnjudged synVerdict = iota // not a SYN judged here: handleSYN parses the options itself
	synByEngine                   // options in e.opts; the engine answers the SYN
	synByLink                     // options in e.opts; the link's program answered it
)

// judgeSYN judges a SYN to a VIP when the link answers SYNs: it parses
// p's options into e.opts and tells whether the program answered p. A
// SYN to a port that does not listen, or whose options do not parse, is
// left unjudged: neither was answered, and handleSYN refuses them as it
// always did (it parses malformed options a second time, on the way to
// dropping them).
func (e *FrontEnd) judgeSYN(p *wire.Packet) synVerdict {
	if !e.cfg.LinkAnswersSYNs || !e.isPort(p.TCP.DstPort()) || wire.ParseOptions(p.TCP, &e.opts) != nil {
		return synUnjudged
	}
	if linkAnswersSYN(p, &e.opts) {
		return synByLink
	}
	return synByEngine
}
