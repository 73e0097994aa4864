package splice

// Control datagrams taken off the front-end's link (fe_control.go): a
// datagram for the host's control socket goes to the caller only when
// the kernel would have given it to the socket and it passes the ingress
// checks; what the kernel would have dropped is dropped and counted;
// anything else is left alone as before (not ours).

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

var (
	feHostIP  = ip4("198.18.0.2") // the front-end host's kernel address, its control socket's
	feHostMAC = feMAC             // the AF_PACKET link's interface: the kernel's MAC
	shimCtl   = netip.AddrPortFrom(backendIP.Addr(), 7401)
)

// feCtlFrame is a datagram from a shim's control socket to the front-end
// host's control socket, both checksums right.
func feCtlFrame(payload []byte) []byte {
	f := wire.UDPFrame{SrcMAC: backendMAC, DstMAC: feHostMAC, Src: backendIP, Dst: feHostIP,
		SrcPort: shimCtl.Port(), DstPort: 7400, IPID: 7, Payload: payload}
	b := make([]byte, f.Len())
	f.Encode(b)
	return b
}

func newControlFE(tb testing.TB) *feHarness {
	return newFE(tb, func(c *FrontEndConfig) {
		c.ControlAddr = netip.AddrPortFrom(feHostIP.Addr(), 7400)
		c.ControlMAC = feHostMAC
	})
}

func TestFrontEndTakesControlDatagramsOffTheLink(t *testing.T) {
	badSum := mutate(feCtlFrame(ctlPayload), func(b []byte) { b[14+20+6] ^= 0x40 }, false)
	noSum := mutate(feCtlFrame(ctlPayload), func(b []byte) { b[14+20+6], b[14+20+7] = 0, 0 }, false)
	for _, tc := range []struct {
		name  string
		frame []byte
		vh    wire.VNetHdr
	}{
		{"exact", feCtlFrame(ctlPayload), wire.VNetHdr{}},
		{"no checksum", noSum, wire.VNetHdr{}},
		// Sent by a kernel on this host, or verified by it.
		{"data valid", badSum, wire.VNetHdr{Flags: wire.VNetFlagDataValid}},
		{"needs csum", badSum, wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newControlFE(t)
			out := h.inputVNet(tc.frame, tc.vh, t0)
			if len(out.Frames) != 0 || len(out.Control) != 1 {
				t.Fatalf("%d frames and %d datagrams out, want the datagram only", len(out.Frames), len(out.Control))
			}
			dg := out.Control[0]
			if dg.From != shimCtl || dg.SrcMAC != backendMAC || !bytes.Equal(dg.Payload, ctlPayload) {
				t.Fatalf("datagram from %v (%v) with %q, want from %v (%v) with %q", dg.From, dg.SrcMAC, dg.Payload, shimCtl, backendMAC, ctlPayload)
			}
			st := h.fe.Stats()
			if st.ControlTaken != 1 || st.ControlBadChecksum+st.ControlBadLength != 0 || totalDrops(st) != 0 {
				t.Fatalf("stats: taken %d, bad %d/%d, drops %v", st.ControlTaken, st.ControlBadChecksum, st.ControlBadLength, st.Drops)
			}
			h.checkCounters()
		})
	}
}

// Frames that are not a datagram for the control socket are the kernel's,
// left alone as before (counted not ours); what the kernel would have
// dropped, or a forged source, is dropped and counted.
func TestFrontEndLeavesOrDropsOtherControlFrames(t *testing.T) {
	good := feCtlFrame(ctlPayload)
	firstFrag := mutate(good, func(b []byte) {
		b[14+6] = 0x20
		binary.BigEndian.PutUint16(b[14+20+4:], 2000)
	}, false)
	refixIP(firstFrag)
	fromVIP := mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetSrc(vipA) }, true)
	martian := mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetSrc(ip4("127.0.0.1")) }, true)
	for _, tc := range []struct {
		name  string
		mod   func(*FrontEndConfig)
		frame []byte
		vh    wire.VNetHdr
		// drop is the drop reason counted, noDrop none; check looks at
		// the other stats.
		drop  dropReason
		check func(st FrontEndStats) bool
	}{
		{"another port", nil, mutate(good, func(b []byte) { binary.BigEndian.PutUint16(b[14+20+2:], 53) }, true), wire.VNetHdr{}, dropNotOurs, nil},
		{"another MAC", nil, mutate(good, func(b []byte) { wire.Ethernet(b).SetDst(routerMAC) }, false), wire.VNetHdr{}, dropNotOurs, nil},
		{"another address", nil, mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetDst(otherIP) }, true), wire.VNetHdr{}, dropNotOurs, nil},
		{"no control address", func(c *FrontEndConfig) {}, good, wire.VNetHdr{}, dropNotOurs, nil},
		{"first fragment", nil, firstFrag, wire.VNetHdr{}, dropNotOurs, func(st FrontEndStats) bool { return st.ControlFragments == 1 }},
		{"GSO", nil, good, wire.VNetHdr{GSOType: wire.GSOUDPL4, GSOSize: 100}, dropMalformed, func(st FrontEndStats) bool { return st.ControlOffloaded == 1 }},
		{"bad checksum", nil, mutate(good, func(b []byte) { b[14+20+6] ^= 0x40 }, false), wire.VNetHdr{}, noDrop,
			func(st FrontEndStats) bool { return st.ControlBadChecksum == 1 }},
		{"UDP length past the packet", nil, mutate(good, func(b []byte) { binary.BigEndian.PutUint16(b[14+20+4:], uint16(len(b)-14-20+1)) }, true),
			wire.VNetHdr{}, noDrop, func(st FrontEndStats) bool { return st.ControlBadLength == 1 }},
		{"from our own VIP", nil, fromVIP, wire.VNetHdr{}, dropOwnSource, nil},
		{"martian source", nil, martian, wire.VNetHdr{}, dropMartianSource, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newControlFE(t)
			if tc.mod != nil {
				h = newFE(t, tc.mod)
			}
			out := h.inputVNet(tc.frame, tc.vh, t0)
			if len(out.Control) != 0 || len(out.Frames) != 0 {
				t.Fatalf("%d datagrams, %d frames out, want nothing", len(out.Control), len(out.Frames))
			}
			st := h.fe.Stats()
			if st.ControlTaken != 0 || (tc.check != nil && !tc.check(st)) {
				t.Fatalf("stats: taken %d, bad %d/%d, fragments %d, offloaded %d",
					st.ControlTaken, st.ControlBadChecksum, st.ControlBadLength, st.ControlFragments, st.ControlOffloaded)
			}
			if tc.drop == noDrop {
				if got := totalDrops(st); got != 0 {
					t.Fatalf("drops %v, want none", st.Drops)
				}
			} else if got := totalDrops(st); got != 1 || st.Drops[tc.drop] != 1 {
				t.Fatalf("drops %v, want one %q", st.Drops, DropReasonName(int(tc.drop)))
			}
			h.checkCounters()
		})
	}
}

// A control address that is not IPv4 with a port is refused.
func TestFrontEndControlAddrMustBeIPv4(t *testing.T) {
	for _, a := range []netip.AddrPort{netip.MustParseAddrPort("[2001:db8::1]:7400"), netip.AddrPortFrom(feHostIP.Addr(), 0)} {
		if _, err := NewFrontEnd(testFrontEndConfig(func(c *FrontEndConfig) { c.ControlAddr = a })); err == nil {
			t.Errorf("ControlAddr %v accepted", a)
		}
	}
}

// noDrop: no drop reason counted.
const noDrop = dropReason(numDropReasons)

func totalDrops(st FrontEndStats) uint64 {
	var n uint64
	for _, d := range st.Drops {
		n += d
	}
	return n
}

// Any frame at the control address: the engine takes a datagram only
// when its headers say it is one, whole, inside the frame, and counts
// what it does with every frame.
func FuzzFrontEndControlDatagram(f *testing.F) {
	f.Add(feCtlFrame(ctlPayload), uint8(0))
	f.Add(feCtlFrame(nil), uint8(wire.VNetFlagDataValid))
	f.Add(mutate(feCtlFrame(ctlPayload), func(b []byte) { b[14+6] = 0x20 }, true), uint8(0))
	f.Fuzz(func(t *testing.T, frame []byte, flags uint8) {
		h := newControlFE(t)
		frame = append([]byte(nil), frame...)
		fixIPChecksum(frame)
		vh := wire.VNetHdr{Flags: flags & wire.VNetFlagDataValid}
		out := h.inputVNet(frame, vh, t0)
		st := h.fe.Stats()
		if uint64(len(out.Control)) != st.ControlTaken || st.ControlTaken > 1 {
			t.Fatalf("%d datagrams out, %d counted taken", len(out.Control), st.ControlTaken)
		}
		for _, dg := range out.Control {
			var p wire.Packet
			if err := wire.Parse(frame, &p); err != nil || p.IP.Dst() != feHostIP || p.IP.Protocol() != wire.ProtoUDP {
				t.Fatalf("took a datagram from a frame that is not UDP to the control address: %v", err)
			}
			u := frame[p.L4:p.End]
			if int(binary.BigEndian.Uint16(u[4:])) != len(u) || !bytes.Equal(dg.Payload, u[wire.UDPHeaderLen:]) {
				t.Fatalf("payload %q is not the datagram's", dg.Payload)
			}
		}
		h.checkCounters()
	})
}
