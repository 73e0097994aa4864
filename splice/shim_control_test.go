package splice

// Control datagrams taken off the wire (shim_control.go): a datagram for
// the host's control port goes to the caller, not to the host, only when
// the kernel would have given it to its socket; everything else passes as
// before, and what the kernel would have dropped is dropped and counted.

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

const testControlPort = 7401

var (
	feCtlIP  = ip4("198.18.0.5") // the front-end's control address
	feCtlMAC = wire.MAC{0x02, 0, 0, 0, 0, 0xfc}
)

// ctlFrame is a datagram from the front-end's control socket to the
// host's control port, with both checksums right; mutators below break
// one thing each.
func ctlFrame(payload []byte) []byte {
	f := wire.UDPFrame{SrcMAC: feCtlMAC, DstMAC: hostMAC, Src: feCtlIP, Dst: backendIP,
		SrcPort: 7400, DstPort: testControlPort, IPID: 0x1234, Payload: payload}
	b := make([]byte, f.Len())
	f.Encode(b)
	return b
}

// refixUDP recomputes the UDP checksum of a frame with a 20-byte IPv4
// header, over the datagram its UDP length names.
func refixUDP(b []byte) []byte {
	ip := wire.IPv4(b[14:])
	u := b[14+20:]
	u = u[:binary.BigEndian.Uint16(u[4:])]
	binary.BigEndian.PutUint16(u[6:], 0)
	c := ^wire.Fold(wire.Sum(u, wire.PseudoHeaderSum(ip.Src(), ip.Dst(), wire.ProtoUDP, uint16(len(u)))))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" (RFC 768)
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return b
}

// mutate returns a copy of b changed by f; fix recomputes the checksums.
func mutate(b []byte, f func(b []byte), fix bool) []byte {
	b = append([]byte(nil), b...)
	f(b)
	if fix {
		refixIP(b)
		refixUDP(b)
	}
	return b
}

func newControlShim(tb testing.TB) *shimHarness {
	return newShim(tb, ShimConfig{ControlPort: testControlPort, HostMAC: hostMAC})
}

var ctlPayload = []byte("a sealed control datagram")

func TestShimTakesControlDatagramsOffTheWire(t *testing.T) {
	padded := ctlFrame([]byte("tiny"))
	padded = append(padded, make([]byte, 60-len(padded))...) // Ethernet's minimum: padding past the IPv4 packet
	noSum := mutate(ctlFrame(ctlPayload), func(b []byte) { b[14+20+6], b[14+20+7] = 0, 0 }, false)
	// A checksum that computes to 0 is sent as 0xffff: find a payload
	// where it does.
	var allOnes []byte
	for i := range 1 << 16 {
		var p [2]byte
		binary.BigEndian.PutUint16(p[:], uint16(i))
		if f := ctlFrame(p[:]); binary.BigEndian.Uint16(f[14+20+6:]) == 0xffff {
			allOnes = f
			break
		}
	}
	if allOnes == nil {
		t.Fatal("no payload gives a checksum of 0xffff")
	}
	badSum := mutate(ctlFrame(ctlPayload), func(b []byte) { b[14+20+6] ^= 0x40 }, false)
	for _, tc := range []struct {
		name    string
		frame   []byte
		vh      wire.VNetHdr
		payload []byte
	}{
		{"exact", ctlFrame(ctlPayload), wire.VNetHdr{}, ctlPayload},
		{"padded frame", padded, wire.VNetHdr{}, []byte("tiny")},
		{"no checksum", noSum, wire.VNetHdr{}, ctlPayload},
		{"checksum 0xffff", allOnes, wire.VNetHdr{}, allOnes[14+28:]},
		{"empty", ctlFrame(nil), wire.VNetHdr{}, []byte{}},
		// The kernel verified it, or made it on this host and left the
		// checksum to the device: the field holds no full checksum.
		{"data valid", badSum, wire.VNetHdr{Flags: wire.VNetFlagDataValid}, ctlPayload},
		{"needs csum", badSum, wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: 6}, ctlPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newControlShim(t)
			out := h.inputVNet(PortWire, tc.frame, tc.vh, t0)
			if len(out.Frames) != 0 || len(out.Control) != 1 {
				t.Fatalf("%d frames and %d datagrams out, want the datagram only", len(out.Frames), len(out.Control))
			}
			dg := out.Control[0]
			if dg.From != netip.AddrPortFrom(feCtlIP.Addr(), 7400) || dg.SrcMAC != feCtlMAC || !bytes.Equal(dg.Payload, tc.payload) {
				t.Fatalf("datagram from %v (%v) with %q, want from %v:7400 (%v) with %q", dg.From, dg.SrcMAC, dg.Payload, feCtlIP, feCtlMAC, tc.payload)
			}
			if st := h.sh.Stats(); st.ControlTaken != 1 || st.WireToHost != 0 || st.ControlDrops() != 0 {
				t.Fatalf("stats %+v", st)
			}
			h.checkCounters()
			out.Reset()
			if len(out.Control) != 0 {
				t.Fatal("Reset kept the datagrams")
			}
		})
	}
}

// Frames the shim does not take pass to the host unchanged, as before.
func TestShimPassesOtherDatagramsToTheHost(t *testing.T) {
	good := ctlFrame(ctlPayload)
	udpTo := func(port uint16) []byte {
		return mutate(good, func(b []byte) { binary.BigEndian.PutUint16(b[14+20+2:], port) }, true)
	}
	// A first fragment of a larger datagram to the control port: MF set,
	// the UDP length names the whole datagram.
	firstFrag := mutate(good, func(b []byte) {
		b[14+6] = 0x20
		binary.BigEndian.PutUint16(b[14+20+4:], 2000)
	}, false)
	refixIP(firstFrag)
	laterFrag := mutate(good, func(b []byte) { binary.BigEndian.PutUint16(b[14+6:], 0x0010) }, true)
	for _, tc := range []struct {
		name  string
		cfg   ShimConfig
		frame []byte
		vh    wire.VNetHdr
		check func(st ShimStats) bool
	}{
		{"another port", ShimConfig{}, udpTo(53), wire.VNetHdr{}, nil},
		{"the control port as source", ShimConfig{}, mutate(good, func(b []byte) {
			binary.BigEndian.PutUint16(b[14+20:], testControlPort)
			binary.BigEndian.PutUint16(b[14+20+2:], 7400)
		}, true), wire.VNetHdr{}, nil},
		{"another address", ShimConfig{}, mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetDst(otherIP) }, true), wire.VNetHdr{}, nil},
		{"another MAC", ShimConfig{}, mutate(good, func(b []byte) { wire.Ethernet(b).SetDst(backendMAC) }, false), wire.VNetHdr{}, nil},
		{"TCP to the control port", ShimConfig{}, frame(wire.TCPFrame{SrcMAC: feCtlMAC, DstMAC: hostMAC, Src: feCtlIP, Dst: backendIP,
			SrcPort: 7400, DstPort: testControlPort, Seq: 1, Flags: wire.TCPFlagSYN, Window: 100}), wire.VNetHdr{}, nil},
		{"no control port", ShimConfig{ControlPort: 0, HostMAC: hostMAC}, good, wire.VNetHdr{}, nil},
		{"first fragment", ShimConfig{}, firstFrag, wire.VNetHdr{}, func(st ShimStats) bool { return st.ControlFragments == 1 }},
		{"later fragment", ShimConfig{}, laterFrag, wire.VNetHdr{}, func(st ShimStats) bool { return st.ControlFragments == 0 }},
		{"GSO", ShimConfig{}, good, wire.VNetHdr{GSOType: wire.GSOUDPL4, GSOSize: 100}, func(st ShimStats) bool { return st.ControlOffloaded == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.ControlPort == 0 && cfg.HostMAC == (wire.MAC{}) {
				cfg = ShimConfig{ControlPort: testControlPort, HostMAC: hostMAC}
			}
			h := newShim(t, cfg)
			out := h.inputVNet(PortWire, tc.frame, tc.vh, t0)
			if len(out.Control) != 0 || len(out.Frames) != 1 || out.Frames[0].Port != PortHost ||
				!bytes.Equal(out.Frames[0].Data, tc.frame) || out.Frames[0].VNet != tc.vh {
				t.Fatalf("%d datagrams, %d frames out, want the frame passed to the host unchanged", len(out.Control), len(out.Frames))
			}
			st := h.sh.Stats()
			if st.ControlTaken != 0 || st.ControlDrops() != 0 || st.WireToHost != 1 || (tc.check != nil && !tc.check(st)) {
				t.Fatalf("stats %+v", st)
			}
			h.checkCounters()
		})
	}
	// With no HostMAC set, a datagram to the port is taken whatever its
	// destination MAC.
	h := newShim(t, ShimConfig{ControlPort: 7402})
	if out := h.input(PortWire, udpTo(7402), t0); len(out.Control) != 1 {
		t.Fatal("a datagram to the configured port with no HostMAC set was not taken")
	}
}

// What the kernel would have dropped before its socket saw it is dropped
// and counted, not handed to the agent, nor passed to the host.
func TestShimDropsBrokenControlDatagrams(t *testing.T) {
	good := ctlFrame(ctlPayload)
	setULen := func(n int) func(b []byte) {
		return func(b []byte) { binary.BigEndian.PutUint16(b[14+20+4:], uint16(n)) }
	}
	// An IPv4 packet with room for only part of a UDP header, ports
	// included.
	short := mutate(good[:14+20+6], func(b []byte) { binary.BigEndian.PutUint16(b[14+2:], 26) }, false)
	refixIP(short)
	for _, tc := range []struct {
		name    string
		frame   []byte
		counter func(st ShimStats) uint64
	}{
		{"bad UDP checksum", mutate(good, func(b []byte) { b[len(b)-1] ^= 1 }, false), func(st ShimStats) uint64 { return st.ControlBadChecksum }},
		{"UDP length past the packet", mutate(good, setULen(8+len(ctlPayload)+1), false), func(st ShimStats) uint64 { return st.ControlBadLength }},
		{"UDP length short of the packet", mutate(good, setULen(8+len(ctlPayload)-1), false), func(st ShimStats) uint64 { return st.ControlBadLength }},
		{"UDP length under a header", mutate(good, setULen(7), false), func(st ShimStats) uint64 { return st.ControlBadLength }},
		{"packet shorter than a UDP header", short, func(st ShimStats) uint64 { return st.ControlBadLength }},
		// The ingress checks every frame for the host passes first.
		{"bad IP checksum", mutate(good, func(b []byte) { b[14+10] ^= 1 }, false), func(st ShimStats) uint64 { return st.IngressBadIPChecksum }},
		{"IP options", withIPOptions(good, lsrr), func(st ShimStats) uint64 { return st.IngressIPOptions }},
		{"TTL 0", withTTL(good, 0), func(st ShimStats) uint64 { return st.IngressTTLZero }},
		{"martian source", mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetSrc(ip4("127.0.0.1")) }, true), func(st ShimStats) uint64 { return st.IngressMartianSource }},
		{"own source", mutate(good, func(b []byte) { wire.IPv4(b[14:]).SetSrc(backendIP) }, true), func(st ShimStats) uint64 { return st.IngressOwnSource }},
		{"multicast source MAC", withSrcMAC(good, wire.MAC{0x01, 0, 0x5e, 0, 0, 1}), func(st ShimStats) uint64 { return st.IngressMulticastMAC }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newControlShim(t)
			out := h.input(PortWire, tc.frame, t0)
			st := h.sh.Stats()
			if len(out.Control) != 0 || len(out.Frames) != 0 || tc.counter(st) != 1 || st.ControlTaken != 0 {
				t.Fatalf("%d datagrams, %d frames out, stats %+v: want it dropped and counted", len(out.Control), len(out.Frames), st)
			}
			h.checkCounters()
		})
	}
}

// TestShimControlDatagramAllocatesNothing: taking a datagram off the wire
// costs no allocation once the output is warm, and the measured path
// really took the datagram each time.
func TestShimControlDatagramAllocatesNothing(t *testing.T) {
	h := newControlShim(t)
	f := ctlFrame(ctlPayload)
	allocs := testing.AllocsPerRun(200, func() {
		h.out.Reset()
		h.sh.Input(PortWire, f, t0, &h.out)
	})
	if allocs != 0 {
		t.Errorf("taking a control datagram: %v allocations", allocs)
	}
	if st := h.sh.Stats(); st.ControlTaken != 201 || len(h.out.Control) != 1 {
		t.Fatalf("%d datagrams taken, want 201 (the runs and the warm-up)", st.ControlTaken)
	}
}

// FuzzShimControl feeds arbitrary frames from the wire to a shim that
// takes control datagrams: it must not panic, every datagram it hands out
// must be what the kernel would have delivered (a UDP datagram to the
// host's control port whose length fits its packet and whose checksum
// verifies), with a payload inside the frame, and every frame is passed,
// taken or counted as dropped.
func FuzzShimControl(f *testing.F) {
	f.Add(ctlFrame(ctlPayload), uint8(0))
	f.Add(mutate(ctlFrame(ctlPayload), func(b []byte) { b[len(b)-1] ^= 1 }, false), uint8(0))
	f.Add(withIPOptions(ctlFrame(nil), lsrr), uint8(wire.VNetFlagDataValid))
	f.Fuzz(func(t *testing.T, b []byte, flags uint8) {
		h := newControlShim(t)
		frame := append([]byte(nil), b...)
		vh := wire.VNetHdr{Flags: flags & (wire.VNetFlagDataValid | wire.VNetFlagNeedsCsum)}
		var out Output
		h.sh.InputVNet(PortWire, frame, vh, t0, &out)
		st := h.sh.Stats()
		if n := uint64(len(out.Frames)) + st.ControlTaken + st.ControlDrops() + st.IngressDrops(); n != 1 {
			t.Fatalf("%d frames, %d taken, %d dropped: the frame went %d ways", len(out.Frames), st.ControlTaken, st.ControlDrops()+st.IngressDrops(), n)
		}
		if len(out.Control) != int(st.ControlTaken) {
			t.Fatalf("%d datagrams out, %d counted", len(out.Control), st.ControlTaken)
		}
		if len(out.Control) == 0 {
			return
		}
		dg := out.Control[0]
		var p wire.Packet
		if err := wire.Parse(frame, &p); err != nil || p.Kind != wire.KindIPv4 || p.IP.HeaderLen() != 20 ||
			p.IP.Protocol() != wire.ProtoUDP || p.IP.Dst() != backendIP || p.Eth.Dst() != hostMAC {
			t.Fatalf("took a frame the kernel would not deliver to the host: %v", err)
		}
		u := frame[p.L4:p.End]
		if binary.BigEndian.Uint16(u[2:]) != testControlPort || int(binary.BigEndian.Uint16(u[4:])) != len(u) ||
			dg.From != netip.AddrPortFrom(p.IP.Src().Addr(), binary.BigEndian.Uint16(u)) || !bytes.Equal(dg.Payload, u[8:]) {
			t.Fatalf("datagram %v %x does not match its frame", dg.From, dg.Payload)
		}
		if binary.BigEndian.Uint16(u[6:]) != 0 && vh.Flags == 0 &&
			wire.Fold(wire.Sum(u, wire.PseudoHeaderSum(p.IP.Src(), p.IP.Dst(), wire.ProtoUDP, uint16(len(u))))) != 0xffff {
			t.Fatal("took a datagram whose checksum does not verify")
		}
		if len(dg.Payload) > 0 && &dg.Payload[len(dg.Payload)-1] != &frame[p.L4+len(u)-1] {
			t.Fatal("the payload does not alias the frame")
		}
	})
}
