package splice

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

func arpRequest(sender wire.MAC, senderIP, target wire.IP4) []byte {
	b := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(b, wire.ARPRequest, sender, senderIP, wire.MAC{}, target, wire.BroadcastMAC)
	return b
}

func TestARPRepliesForEveryOwnedAddressAndNothingElse(t *testing.T) {
	h := newFE(t, nil)
	asker := wire.MAC{0x02, 0, 0, 0, 0, 0x33}
	for _, target := range []wire.IP4{vipA, vipB, handoffIP} {
		b := onlyFrame(t, h.input(arpRequest(asker, backendIP, target), t0))
		pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
		eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		arp, _ := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
		if eth == nil || arp == nil {
			t.Fatalf("reply for %v is not Ethernet/ARP: %x", target, b)
		}
		if !bytes.Equal(eth.SrcMAC, feMAC[:]) || !bytes.Equal(eth.DstMAC, asker[:]) {
			t.Errorf("reply for %v: Ethernet %v -> %v", target, eth.SrcMAC, eth.DstMAC)
		}
		if arp.Operation != layers.ARPReply ||
			!bytes.Equal(arp.SourceHwAddress, feMAC[:]) || !bytes.Equal(arp.SourceProtAddress, target[:]) ||
			!bytes.Equal(arp.DstHwAddress, asker[:]) || !bytes.Equal(arp.DstProtAddress, backendIP[:]) {
			t.Errorf("reply for %v: op %d %v is-at %v, to %v/%v", target, arp.Operation,
				arp.SourceProtAddress, arp.SourceHwAddress, arp.DstProtAddress, arp.DstHwAddress)
		}
	}
	if out := h.input(arpRequest(asker, backendIP, otherIP), t0); len(out.Frames) != 0 {
		t.Errorf("answered ARP for %v, which it does not own", otherIP)
	}
	reply := arpRequest(asker, backendIP, vipA)
	binary.BigEndian.PutUint16(reply[14+6:], wire.ARPReply)
	if out := h.input(reply, t0); len(out.Frames) != 0 {
		t.Errorf("answered an ARP reply")
	}
	if got := h.fe.Stats().ARPReplies; got != 3 {
		t.Errorf("ARPReplies = %d, want 3", got)
	}
	h.checkCounters()
}

func TestSynAckCarriesCookieAndOnlyOptionsTheClientOffered(t *testing.T) {
	cases := []struct {
		name  string
		offer wire.SynOptions
	}{
		{"linux", fullOffer(777)},
		{"none", wire.SynOptions{WScale: -1}},
		{"mss-only", wire.SynOptions{MSS: 1400, WScale: -1}},
		{"sack-no-ts", wire.SynOptions{MSS: 1460, WScale: 2, SACKPermitted: true}},
		{"ts-no-sack", wire.SynOptions{MSS: 536, WScale: -1, TS: true, TSVal: 0xfffffff0}},
		{"wscale-0", wire.SynOptions{MSS: 1220, WScale: 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			c := newClient(1234, 0xabcdef01, tc.offer)
			now := t0 + 5*ms
			sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), now)),
				ethFrom(feMAC), ethTo(routerMAC),
				from(vipA, webPort), to(clientIP, 1234),
				ackIs(c.isn+1), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK), windowIs(65535))

			key := fourTuple{srcIP: clientIP, dstIP: vipA, srcPort: 1234, dstPort: webPort}
			tsVal, _, _ := sa.ts()
			info, ok := h.fe.cookies.check(now, key, sa.seq()+1, c.isn+1, tc.offer.TS, tsVal)
			if !ok {
				t.Fatalf("SYN-ACK ISN %#x is not a valid cookie", sa.tcp.Seq)
			}
			if info.sack != tc.offer.SACKPermitted || info.ts != tc.offer.TS || info.wscale != tc.offer.WScale {
				t.Errorf("cookie remembers %+v, client offered %+v", info, tc.offer)
			}

			mss, ok := sa.option(layers.TCPOptionKindMSS)
			if !ok || binary.BigEndian.Uint16(mss.OptionData) != h.cfg.MSS {
				t.Errorf("MSS option %v, want %d", mss, h.cfg.MSS)
			}
			ws, ok := sa.option(layers.TCPOptionKindWindowScale)
			if ok != (tc.offer.WScale >= 0) {
				t.Errorf("window scale present %v, client offered %d", ok, tc.offer.WScale)
			} else if ok && int(ws.OptionData[0]) != h.cfg.WScale {
				t.Errorf("window scale %d, want %d", ws.OptionData[0], h.cfg.WScale)
			}
			if _, ok := sa.option(layers.TCPOptionKindSACKPermitted); ok != tc.offer.SACKPermitted {
				t.Errorf("SACK-permitted present %v, offered %v", ok, tc.offer.SACKPermitted)
			}
			val, ecr, ok := sa.ts()
			if ok != tc.offer.TS {
				t.Errorf("timestamps present %v, offered %v", ok, tc.offer.TS)
			} else if ok && (ecr != tc.offer.TSVal || tsClock(now)-val >= 1<<cookieOptBits || val&cookieOptMask != info.cookieBits) {
				// Our clock, moved back to carry the cookie's option bits.
				t.Errorf("TSval %d TSecr %#x, want %d or a little less, ending in %#x, and %#x", val, ecr,
					tsClock(now), info.cookieBits, tc.offer.TSVal)
			}
			if h.fe.Flows() != 0 {
				t.Errorf("a SYN left %d flows; cookies keep no state", h.fe.Flows())
			}
			h.checkCounters()
		})
	}
}

func TestSynAckAndC2SynNeverReflectUnknownOptions(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(1234, 0x1000, fullOffer(1))
	// Linux's options plus TCP Fast Open (34) and an experimental option
	// (254) carrying data.
	opts := append(synOpts(c.offer), 34, 2, 254, 6, 0xf9, 0x89, 0xaa, 0xbb)
	syn := c.frame(wire.TCPFlagSYN, c.isn, 0, opts, nil)
	sa := expectTCP(t, onlyFrame(t, h.input(syn, t0)))
	for _, o := range sa.tcp.Options {
		if o.OptionType == 34 || o.OptionType == 254 {
			t.Errorf("SYN-ACK reflects option %d", o.OptionType)
		}
	}
	c.isnF = sa.seq()
	c.peerTS, _, c.ts = sa.ts()
	c.rcvNxt = c.isnF + 1
	h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), t0)
	id := c.sendRequest(t, h, []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), t0+ms)
	out := h.call(func(out *Output) { h.fe.Dispatch(id, testBackend, t0+2*ms, out) })
	syn2 := expectTCP(t, onlyFrame(t, out))
	for _, o := range syn2.tcp.Options {
		switch o.OptionType {
		case layers.TCPOptionKindMSS, layers.TCPOptionKindWindowScale, layers.TCPOptionKindSACKPermitted,
			layers.TCPOptionKindTimestamps, layers.TCPOptionKindNop, layers.TCPOptionKindEndList:
		default:
			t.Errorf("C2 SYN carries option %d", o.OptionType)
		}
	}
}

func TestSynToClosedPortIsReset(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(5555, 0x89abcdef, fullOffer(3))
	c.vport = 81
	expectTCP(t, onlyFrame(t, h.input(c.syn(), t0)),
		ethTo(routerMAC), from(vipA, 81), to(clientIP, 5555),
		seqIs(0), ackIs(c.isn+1), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK))
	if d := h.fe.Stats().Drops[dropClosedPort]; d != 1 {
		t.Errorf("closed-port drops = %d, want 1", d)
	}
	if h.fe.Flows() != 0 {
		t.Errorf("Flows() = %d", h.fe.Flows())
	}
	h.checkCounters()
}

func TestForgedCookieIsResetAndCounted(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(4321, 0x55555555, fullOffer(10))
	sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), t0)))
	ourTS, _, _ := sa.ts()
	forged := []struct {
		name     string
		seq, ack wire.Seq
		tsEcr    uint32
	}{
		{"hash bit flipped", c.isn + 1, (sa.seq() ^ 1) + 1, ourTS},
		{"top hash bit flipped", c.isn + 1, (sa.seq() ^ 1<<30) + 1, ourTS},
		{"epoch bit flipped", c.isn + 1, (sa.seq() ^ 1<<31) + 1, ourTS},
		{"option bits in the TS echo flipped", c.isn + 1, sa.seq() + 1, ourTS ^ 1<<5},
		{"other client ISN", c.isn + 2, sa.seq() + 1, ourTS},
	}
	for i, f := range forged {
		ack := c.frame(wire.TCPFlagACK, f.seq, f.ack, segOpts(&[2]uint32{c.tsVal, f.tsEcr}), nil)
		expectTCP(t, onlyFrame(t, h.input(ack, t0+ms)),
			from(vipA, webPort), to(clientIP, 4321), seqIs(f.ack), flagsAre(wire.TCPFlagRST))
		if d := h.fe.Stats().Drops[dropBadCookie]; d != uint64(i+1) {
			t.Errorf("%s: bad-cookie drops = %d, want %d", f.name, d, i+1)
		}
		if h.fe.Flows() != 0 {
			t.Fatalf("%s: accepted a forged cookie", f.name)
		}
	}
	// Without the timestamp the client offered, the cookie is read in
	// the other layout, and fails.
	noTS := c.frame(wire.TCPFlagACK, c.isn+1, sa.seq()+1, nil, nil)
	if h.input(noTS, t0+ms); h.fe.Flows() != 0 {
		t.Fatalf("accepted a final ACK without the timestamps its SYN offered")
	}
	// The genuine ACK still works: nothing was remembered in between.
	genuine := c.frame(wire.TCPFlagACK, c.isn+1, sa.seq()+1, segOpts(&[2]uint32{c.tsVal, ourTS}), nil)
	if out := h.input(genuine, t0+ms); len(out.Frames) != 0 {
		t.Errorf("genuine ACK answered with %d frames", len(out.Frames))
	}
	if h.fe.Flows() != 1 || h.fe.Stats().Accepted != 1 {
		t.Errorf("Flows() = %d, Accepted = %d after the genuine ACK", h.fe.Flows(), h.fe.Stats().Accepted)
	}
	h.checkCounters()
}

func TestCookieOlderThanTwoEpochsFails(t *testing.T) {
	h := newFE(t, nil)
	issued := 10*cookieEpoch + s1 // one second into epoch 10
	young := newClient(1001, 0x100, fullOffer(1))
	old := newClient(1002, 0x200, fullOffer(1))
	saYoung := expectTCP(t, onlyFrame(t, h.input(young.syn(), issued)))
	saOld := expectTCP(t, onlyFrame(t, h.input(old.syn(), issued)))

	// 126 s later is still the next epoch: accepted.
	if out := h.input(finalACK(young, saYoung, nil), issued+126*s1); len(out.Frames) != 0 {
		t.Errorf("cookie one epoch old answered with %d frames, want acceptance", len(out.Frames))
	}
	if h.fe.Flows() != 1 {
		t.Fatalf("cookie one epoch old not accepted")
	}
	// 127 s later is two epochs on: rejected.
	expectTCP(t, onlyFrame(t, h.input(finalACK(old, saOld, nil), issued+127*s1)),
		flagsAre(wire.TCPFlagRST), seqIs(saOld.seq()+1))
	if h.fe.Flows() != 1 || h.fe.Stats().Drops[dropBadCookie] != 1 {
		t.Errorf("cookie two epochs old: Flows() = %d, bad-cookie drops = %d", h.fe.Flows(), h.fe.Stats().Drops[dropBadCookie])
	}
	h.checkCounters()
}
