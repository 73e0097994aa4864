package frontend

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/splice/link"
)

// Hidden SYNs (issue 7). With the SYN answer on (synanswer.go) the
// engines still read every SYN: a socket of every protocol (ETH_P_ALL)
// gets a frame from the kernel before tc ingress runs, so each of the
// program's SYN-ACKs also cost a shard a frame, a wake-up and the
// engine's work to find out that it was answered. Bound to IPv4 alone,
// the sockets get frames after tc ingress (link.AFPacketConfig.Protocol)
// and never see the SYNs the program redirected: an engine then answers
// every SYN it reads, since the program passed each of those on, and
// needs no copy of the program's rule. ARP no longer comes with IPv4, so
// shard 0 reads it from a socket of its own, rarely readable.
//
// What the engines no longer see:
//
//   - the SYN that reuses the tuple of a lingering flow: the new
//     connection's first segment shows it instead, by its valid cookie
//     (splice/fe_client.go, startsAnew);
//   - the SYN's step in the handoff timelines: with -timeline the
//     sockets read every protocol, as before;
//   - SYNs counted by the engines (syn_cookies_by_link): the program's
//     own count is syns_answered_by_link in /status.
//
// On an interface enslaved to a bridge or a bond, a socket of one
// protocol reads nothing at all (the master's handler takes every
// frame first), so there too the sockets read every protocol.

// tokARP is the poller token of shard 0's ARP socket.
const tokARP = tokGather + 1

// arpBatchFrames bounds the ARP frames one pass takes; more wait for the
// next (the socket stays readable).
const arpBatchFrames = 8

// arpFrameSize holds an ARP frame for IPv4 over Ethernet (42 bytes,
// padded to 60) with room for a VLAN tag and trailers.
const arpFrameSize = 256

// hidesSYNs reports whether the links are to hide the SYNs the program
// answers, and if not, why.
func hidesSYNs(cfg *Config, syna *synAnswer) (bool, string) {
	return hidesSYNsOf(cfg, syna != nil, masterOf)
}

// hidesSYNsOf is hidesSYNs with the program's presence and the lookup of
// the link's master device (its index, 0 for none) as arguments.
func hidesSYNsOf(cfg *Config, answering bool, master func(link string) (int, error)) (bool, string) {
	if !answering {
		return false, "no SYN answer"
	}
	if cfg.Timeline != "" {
		return false, "-timeline takes each connection's SYN step from its SYN"
	}
	m, err := master(cfg.Link)
	if err != nil {
		return false, fmt.Sprintf("link %s: %v", cfg.Link, err)
	}
	if m != 0 {
		return false, "the link is a bridge's or a bond's port"
	}
	return true, ""
}

// masterOf is the index of the device name is enslaved to, 0 for none.
func masterOf(name string) (int, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, err
	}
	return l.Attrs().MasterIndex, nil
}

// openARP opens shard 0's ARP socket on the link.
func openARP(cfg *Config) (*link.AFPacket, error) {
	a, err := link.OpenAFPacket(cfg.Link, link.AFPacketConfig{Promiscuous: true, Protocol: unix.ETH_P_ARP})
	if err != nil {
		return nil, fmt.Errorf("frontend: ARP socket: %w", err)
	}
	return a, nil
}

// readARP takes the ARP frames waiting on shard 0's ARP socket into the
// pass.
func (s *shard) readARP() error {
	n, err := s.arp.ReadBatch(s.arpBatch)
	if err != nil {
		return fmt.Errorf("frontend: ARP socket on %s: %w", s.arp.Name(), err)
	}
	for i := range n {
		s.rxBatch, s.rxVNet = append(s.rxBatch, s.arpBatch.Frame(i)), append(s.rxVNet, s.arpBatch.VNet[i])
	}
	s.rxOther += n
	return nil
}
