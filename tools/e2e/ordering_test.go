package e2e

import (
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestDelayedSpliceNeverLeaksUntranslatedReplies builds a second lab whose
// shim holds every Splice message for 300 ms (longer than the front-end's
// Splice retry, so duplicates arrive too). A GET goes with its Splice
// (the early request), so its segments reach the shim 300 ms before the
// Splice: the shim must hold them until it has the Splice, or the server
// would answer what the shim cannot translate yet. None escapes
// untranslated: on the client's link every TCP segment towards the
// client comes from the VIP, the bodies are exact, and the shim counted
// the requests it held and released (the path ran). Before the early
// request the front-end held the request until the SpliceAck.
func TestDelayedSpliceNeverLeaksUntranslatedReplies(t *testing.T) {
	l := extraLab(t, "d", func(cfg *lab.Config) {
		cfg.Backends = 1
		cfg.BackendArgs = []string{"-splice-delay", "300ms", "-linger", "1s"}
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
	if held, released := shim["HeldRequests"].(float64), shim["HeldReleased"].(float64); held < 9 || released != held {
		t.Errorf("the shim held %v request segments until their Splice and released %v; want every request's (9) and all of them", held, released)
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
