package splice

// What the ingress checks (ingress.go) cost on the paths every client
// and C2 frame takes: a spliced client segment forwarded by the front-end
// and a request-direction frame passed by the shim from the wire, each
// as a pure ACK (66-byte frame with timestamps) and as a 1460-byte
// segment, with the TCP checksum verified in software (no vnet header)
// and vouched for by the kernel (DATA_VALID). Each round copies the
// frame in first (the engines rewrite in place); that copy is in every
// number. Run with -bench Ingress before and after a change.

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// ingressCases are the frames measured: a pure ACK and a full segment,
// checked in software and with the kernel's verdict.
var ingressCases = []struct {
	name    string
	payload int
	vh      wire.VNetHdr
}{
	{"ack", 0, wire.VNetHdr{}},
	{"seg1460", 1460, wire.VNetHdr{}},
	{"ack-datavalid", 0, wire.VNetHdr{Flags: wire.VNetFlagDataValid}},
	{"seg1460-datavalid", 1460, wire.VNetHdr{Flags: wire.VNetFlagDataValid}},
}

func BenchmarkIngressFrontEnd(b *testing.B) {
	for _, tc := range ingressCases {
		b.Run(tc.name, func(b *testing.B) {
			sc := connectSpliced(b, defaultSpliceParams())
			c := sc.c
			tmpl := c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1+4096, make([]byte, tc.payload))
			frame := make([]byte, len(tmpl))
			var out Output
			before := sc.h.fe.Stats().ForwardedFrames
			b.ReportAllocs()
			for b.Loop() {
				copy(frame, tmpl)
				out.Reset()
				sc.h.fe.InputVNet(frame, tc.vh, sc.now+ms, &out)
			}
			if sc.h.fe.Stats().ForwardedFrames == before || len(out.Frames) != 1 {
				b.Fatalf("the path measured is not forwarding")
			}
		})
	}
}

func BenchmarkIngressShimWire(b *testing.B) {
	for _, tc := range ingressCases {
		b.Run(tc.name, func(b *testing.B) {
			sc := newShimConn(b, ShimConfig{}, 0x1000, 0x2000, nil)
			tmpl := sc.fromFrontEnd(wire.TCPFlagACK, sc.srv.nxt, make([]byte, tc.payload))
			frame := make([]byte, len(tmpl))
			var out Output
			before := sc.h.sh.Stats().WireToHost
			b.ReportAllocs()
			for b.Loop() {
				copy(frame, tmpl)
				out.Reset()
				sc.h.sh.InputVNet(PortWire, frame, tc.vh, t0+s1, &out)
			}
			if sc.h.sh.Stats().WireToHost == before || len(out.Frames) != 1 {
				b.Fatalf("the path measured is not passing to the host")
			}
		})
	}
}
