package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestDelayedSpliceNeverLeaksUntranslatedReplies builds a lab whose shim
// holds every Splice message for 300 ms (longer than the front-end's
// Splice retry, so duplicates arrive too), once with -early-request=false,
// once with early requests (the default), and once with the front-end's
// own Fast Open SYN carrying the request (the default too), which the
// kernel answers long before the Splice. Without, the front-end does
// not send the request before the shim confirmed; with early requests a
// GET is on its way before its Splice is in place (the delayed Splice
// cannot carry it, so the front-end sends it again after its
// retransmission timeout), its segments reach the shim before the
// Splice, and the shim must hold them until it has it, or the server
// would answer what the shim cannot translate yet. Either way no reply
// escapes untranslated: on the client's link every TCP segment towards
// the client comes from the VIP, the bodies are exact, and the shim
// counted the request segments it held and released (every request's
// with early requests, none without: the path ran, or did not).
func TestDelayedSpliceNeverLeaksUntranslatedReplies(t *testing.T) {
	for _, mode := range []string{"ack first", "early request", "request in the SYN"} {
		early := mode != "ack first"
		t.Run(mode, func(t *testing.T) {
			l := extraLab(t, "d", func(cfg *lab.Config) {
				cfg.Backends = 1
				cfg.BackendArgs = []string{"-splice-delay", "300ms", "-linger", "1s"}
				// Early requests are the default; a Splice delayed at the
				// shim cannot carry its request (backend/agent.go), so the
				// front-end sends it after its retransmission timeout and
				// the shim holds it. The front-end's own Fast Open SYN
				// (the default too) would bring it to the kernel without
				// the Splice: off but in the last run, where the kernel
				// answers 300 ms before the Splice comes and the
				// front-end's ACK completes its handshake (a Fast Open
				// socket sends nothing again before).
				cfg.FrontendArgs = append(cfg.FrontendArgs, fmt.Sprintf("-early-request=%v", early),
					fmt.Sprintf("-fast-open-in-syn=%v", mode == "request in the SYN"))
			})
			pcap := filepath.Join(t.TempDir(), "c1.pcap")
			stop, err := l.StartCapture("c1", pcap)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int64{0, 1 << 10, 1 << 20} {
				for i := 0; i < 3; i++ {
					checkBody(t, curlGet(t, l, "c1", vipURL(8080, size)), size, "delayed splice")
				}
			}
			if _, err := stop(); err != nil {
				t.Fatal(err)
			}
			client := l.ClientAddr(1).String()
			fromVIP := 0
			eachTCP(t, pcap, func(ip *layers.IPv4, tcp *layers.TCP) {
				if ip.DstIP.String() != client || tcp.SrcPort != 8080 {
					return // not towards the client, or the admin endpoint answering readiness checks
				}
				if ip.SrcIP.String() != lab.VIP {
					t.Fatalf("segment to the client from %v:%d (seq %d, %d bytes): a reply escaped untranslated", ip.SrcIP, tcp.SrcPort, tcp.Seq, len(tcp.Payload))
				}
				fromVIP++
			})
			if fromVIP < 9 {
				t.Fatalf("only %d segments from the VIP captured", fromVIP)
			}
			shim := backendStatus(t, l, 1)["shim"].(map[string]any)
			held, released := shim["HeldRequests"].(float64), shim["HeldReleased"].(float64)
			if mode == "early request" && (held < 9 || released != held) || !early && held != 0 {
				t.Errorf("the shim held %v request segments until their Splice and released %v (early requests %v)", held, released, early)
			}
			// The Splices came off the wire, not through the kernel's
			// socket (issue 7, splice/shim_control.go): one per request
			// at least, none dropped.
			if taken, bad := shim["ControlTaken"].(float64), shim["ControlBadChecksum"].(float64)+shim["ControlBadLength"].(float64); taken < 9 || bad != 0 {
				t.Errorf("the shim took %v control datagrams off the wire and dropped %v, want at least 9 and none", taken, bad)
			}
		})
	}
}

// TestFrontendOnTAP runs the front-end as a pure userspace host on a TAP
// device bridged to the wire (how a VM on a TAP bridge sees it) and
// downloads through it.
func TestFrontendOnTAP(t *testing.T) {
	l := extraLab(t, "t", func(cfg *lab.Config) {
		cfg.Backends = 2
		cfg.FrontendTAP = true
	})
	for _, size := range []int64{0, 1 << 10, 1 << 20, 16 << 20} {
		for i := 0; i < 2; i++ {
			checkBody(t, curlGet(t, l, "c1", vipURL(8080, size)), size, "front-end on TAP")
		}
	}
	if st := frontendStatus(t, l); st.Engine.ReplyPayloadBytes != 0 {
		t.Errorf("front-end on TAP received %d reply payload bytes", st.Engine.ReplyPayloadBytes)
	}
}
