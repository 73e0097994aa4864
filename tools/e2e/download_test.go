package e2e

import (
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/tools/lab"
)

var sizes = []int64{0, 1 << 10, 1 << 20, 64 << 20}

// TestDownloadsFromEveryBackend downloads each size from each back-end,
// through nginx (port 80) and the test server (port 8080), and checks
// every body byte for byte. A capture on the front-end's switch port runs
// meanwhile: no response payload may cross it.
func TestDownloadsFromEveryBackend(t *testing.T) {
	l := needLab(t)
	pcap := filepath.Join(t.TempDir(), "fe.pcap")
	stop, err := l.StartCapture("fe", pcap)
	if err != nil {
		t.Fatal(err)
	}
	before := frontendStatus(t, l)
	for _, port := range []int{80, 8080} {
		for _, size := range sizes {
			url := vipURL(port, size)
			seen := map[int]bool{}
			// Sequential requests rotate over idle back-ends; allow a
			// few extra tries in case a slot is still held.
			for try := 0; try < 4*backends && len(seen) < backends; try++ {
				f := curlGet(t, l, "c1", url)
				checkBody(t, f, size, url)
				seen[f.backend] = true
			}
			if len(seen) < backends {
				t.Fatalf("%s: served only by back-ends %v", url, seen)
			}
		}
	}
	frames, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	after := frontendStatus(t, l)
	if got := after.Engine.ReplyPayloadBytes - before.Engine.ReplyPayloadBytes; got != 0 {
		t.Errorf("front-end counted %d reply payload bytes, want 0", got)
	}
	if after.Engine.HandoffsDone-before.Engine.HandoffsDone < uint64(2*len(sizes)*backends) {
		t.Errorf("only %d handoffs done", after.Engine.HandoffsDone-before.Engine.HandoffsDone)
	}
	// The control protocol ran in the link's batches (issue 7): each
	// Splice went as a frame of the front-end's, and the shims'
	// datagrams were taken off the link, none refused, none read twice
	// (a second read would be refused as a replay).
	handoffs := after.Engine.HandoffsDone - before.Engine.HandoffsDone
	if sent := after.ControlFrames - before.ControlFrames; sent < handoffs {
		t.Errorf("%d Splices sent as frames on the link for %d handoffs", sent, handoffs)
	}
	if taken := after.Engine.ControlFromLink - before.Engine.ControlFromLink; taken < handoffs {
		t.Errorf("%d control datagrams taken off the link for %d handoffs (a Feedback each at least)", taken, handoffs)
	}
	// The lab's back-ends take TCP Fast Open (lab.Config.FastOpen), so
	// the front-end's carried requests went in C2's SYN once the shims
	// had cookies (issue 7): the first handoff to each back-end asks for
	// one, the later ones use it.
	inSYN := after.Engine.RequestsInSYN - before.Engine.RequestsInSYN
	if inSYN == 0 {
		t.Errorf("no request went in C2's SYN in %d handoffs (%d carried)", handoffs,
			after.Engine.RequestsCarried-before.Engine.RequestsCarried)
	}
	// The SYN-ACKs that took them stood for their SpliceAcks
	// (proto.SpliceImplicitAck): the shims sent none for those.
	implied := 0.0
	for k := 1; k <= backends; k++ {
		implied += backendStatus(t, l, k)["control"].(map[string]any)["splice_acks_implied"].(float64)
	}
	if inSYN > 0 && implied == 0 {
		t.Errorf("%d requests went in C2's SYN, and the shims still sent a SpliceAck for each", inSYN)
	}
	if bad := after.BadCtl - before.BadCtl; bad != 0 || after.Engine.ControlFromLinkDropped != 0 {
		t.Errorf("%d control datagrams refused, %d dropped off the link", bad, after.Engine.ControlFromLinkDropped)
	}
	toClient, fromClient := replyPayloadOnLink(t, pcap, l)
	if fromClient == 0 {
		t.Fatalf("capture of %d frames saw no client traffic: the capture is not where it should be", frames)
	}
	if toClient != 0 {
		t.Errorf("capture on the front-end link saw %d response payload bytes towards the client, want 0", toClient)
	}
}

// replyPayloadOnLink sums the TCP payload of web responses towards the
// client (from the VIP or a back-end; the front-end's own admin answers
// to the test do not count) and counts frames from the client.
func replyPayloadOnLink(t *testing.T, file string, l *lab.Lab) (payloadToClient int, framesFromClient int) {
	t.Helper()
	client := l.ClientAddr(1).String()
	eachTCP(t, file, func(ip *layers.IPv4, tcp *layers.TCP) {
		switch {
		case ip.DstIP.String() == client && (tcp.SrcPort == 80 || tcp.SrcPort == 8080):
			payloadToClient += len(tcp.Payload)
		case ip.SrcIP.String() == client:
			framesFromClient++
		}
	})
	return payloadToClient, framesFromClient
}

// TestClientTCPSettings repeats a download with the client kernel set to
// each TCP variant the splice must cope with: no timestamps, no SACK, no
// window scaling, and receive buffers that give the two sides different
// window scales.
func TestClientTCPSettings(t *testing.T) {
	l := needLab(t)
	variants := []struct{ name, key, value string }{
		{"timestamps-off", "net.ipv4.tcp_timestamps", "0"},
		{"sack-off", "net.ipv4.tcp_sack", "0"},
		{"window-scaling-off", "net.ipv4.tcp_window_scaling", "0"},
		{"tiny-rmem", "net.ipv4.tcp_rmem", "4096 4096 4096"},
		{"huge-rmem", "net.ipv4.tcp_rmem", "4096 33554432 67108864"},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			old, err := l.Command("c1", "sysctl", "-n", v.key).Output()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Sysctl("c1", v.key, string(trimNL(old))) })
			if err := l.Sysctl("c1", v.key, v.value); err != nil {
				t.Fatal(err)
			}
			for _, port := range []int{80, 8080} {
				for _, size := range []int64{1 << 10, 1 << 20, 64 << 20} {
					url := vipURL(port, size)
					checkBody(t, curlGet(t, l, "c1", url), size, url)
				}
			}
		})
	}
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
