package backend

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/internal/exposition/expositiontest"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/tools/netns"
)

// Every family of a status, parsed back with the Prometheus text parser,
// has its type, labels and the status's values.
func TestShimMetricsParseBack(t *testing.T) {
	st := Status{
		Registered: true, Entries: 4, Active: 2,
		Shim: splice.ShimStats{HostToWire: 10, WireToHost: 20, Translated: 30, TranslatedBytes: 3000, Splices: 5,
			RefusedNoHandshake: 2, BadOptions: 1, IngressTTLZero: 3, Expired: 4, ExpiredLifetime: 1, PeakActive: 3,
			ControlTaken: 11, ControlBadChecksum: 2},
		Wire:        link.Stats{RxFrames: 50, TxFrames: 40, TxErrors: 1, TxInWait: 30},
		TAP:         link.Stats{RxFrames: 35, TxDropped: 2},
		KernelDrops: 7,
		Control: AgentStats{Registers: 2, Registrations: 1, Keepalives: 9, Echoes: 8, Splices: 7, Feedbacks: 5,
			BadMessages: 3, Refused: map[string]uint64{"replay": 2, "auth": 1}, Stale: 1},
		ControlSent: ControlSent{Wire: 12, Socket: 3},
		Workers: []WorkerStatus{{Entries: 3, Wire: link.Stats{RxFrames: 30, TxFrames: 25}, HandedOver: 6},
			{Entries: 1, Wire: link.Stats{RxFrames: 20, TxFrames: 15}, HandoffsLost: 1}},
	}
	f, _ := expositiontest.Gather(t, shimCollector{status: func() (Status, error) { return st, nil }})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_shim_passed_frames_total", []string{"dir", "wire_to_host"}, 20},
		{"qsplice_shim_translated_frames_total", nil, 30},
		{"qsplice_shim_translated_bytes_total", nil, 3000},
		{"qsplice_shim_splices_total", nil, 5},
		{"qsplice_shim_splices_refused_total", []string{"reason", "no-handshake"}, 2},
		{"qsplice_shim_splices_refused_total", []string{"reason", "full"}, 0},
		{"qsplice_shim_drops_total", []string{"reason", "bad-options"}, 1},
		{"qsplice_shim_drops_total", []string{"reason", "ttl-zero"}, 3},
		{"qsplice_shim_expired_total", nil, 4},
		{"qsplice_shim_expired_lifetime_total", nil, 1},
		{"qsplice_shim_link_frames_total", []string{"link", "wire", "dir", "rx"}, 50},
		{"qsplice_shim_link_frames_total", []string{"link", "tap", "dir", "rx"}, 35},
		{"qsplice_shim_link_tx_errors_total", []string{"link", "wire"}, 1},
		{"qsplice_shim_link_tx_dropped_total", []string{"link", "tap"}, 2},
		{"qsplice_shim_link_tx_in_wait_total", []string{"link", "wire"}, 30},
		{"qsplice_shim_kernel_drops_total", nil, 7},
		{"qsplice_shim_control_sent_total", []string{"message", "register"}, 2},
		{"qsplice_shim_control_sent_total", []string{"message", "feedback"}, 5},
		{"qsplice_shim_control_received_total", []string{"message", "splice"}, 7},
		{"qsplice_shim_control_refused_total", []string{"reason", "replay"}, 2},
		{"qsplice_shim_control_bad_messages_total", nil, 3},
		{"qsplice_shim_control_wire_total", []string{"what", "taken"}, 11},
		{"qsplice_shim_control_sent_path_total", []string{"path", "wire"}, 12},
		{"qsplice_shim_control_sent_path_total", []string{"path", "socket"}, 3},
		{"qsplice_shim_control_wire_total", []string{"what", "bad_checksum"}, 2},
		{"qsplice_shim_control_wire_total", []string{"what", "bad_length"}, 0},
		{"qsplice_shim_control_ignored_total", []string{"why", "stale"}, 1},
		{"qsplice_shim_registrations_total", nil, 1},
		{"qsplice_shim_worker_wire_frames_total", []string{"worker", "1", "dir", "rx"}, 20},
		{"qsplice_shim_worker_tap_handovers_total", []string{"worker", "0", "outcome", "passed"}, 6},
		{"qsplice_shim_worker_tap_handovers_total", []string{"worker", "1", "outcome", "lost"}, 1},
	} {
		if got := f.Counter(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_shim_registered", nil, 1},
		{"qsplice_shim_entries", nil, 4},
		{"qsplice_shim_active", nil, 2},
		{"qsplice_shim_peak_active", nil, 3},
		{"qsplice_shim_worker_entries", []string{"worker", "0"}, 3},
	} {
		if got := f.Gauge(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
}

// scrapeClient dials from the fe namespace, through the shim, as a
// Prometheus server on the LAN would.
func (r *daemonRig) scrapeClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = netns.Do(r.fe, func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

// /metrics on a running shim counts what was driven through it: one
// Splice installed, two refused for want of a handshake, one replayed
// and one garbage datagram refused; its pages parse with the Prometheus
// text parser and pass promtool.
func TestDaemonMetricsCountWhatWasDriven(t *testing.T) {
	r := newDaemonRig(t, true, 2)
	ln := r.listenWeb(80)
	defer ln.Close()
	stop := r.start(r.config())
	_, shim := recv[*proto.Register](r, 10*time.Second)

	conn, sp := r.dialC2(1, 40001)
	defer conn.Close()
	r.send(shim, sp)
	if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); !a.OK {
		t.Fatalf("ack of the Splice with a handshake: %+v", a)
	}
	write := func(b []byte) {
		t.Helper()
		if _, err := r.ctl.WriteToUDPAddrPort(b, shim); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(m proto.Message) []byte {
		t.Helper()
		b, err := r.feCodec.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	noHandshake := encode(testSplice(2, 40010))
	write(noHandshake)
	if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); a.OK || a.RequestID != 2 {
		t.Fatalf("ack of a Splice without a handshake: %+v", a)
	}
	write(noHandshake) // a replay: refused by the codec, not answered
	write([]byte("not a control message"))
	// Worker 0 reads the control socket in order: once this one is
	// answered, the two before it were counted.
	write(encode(testSplice(3, 40011)))
	if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); a.OK || a.RequestID != 3 {
		t.Fatalf("ack of the second Splice without a handshake: %+v", a)
	}

	url := "http://" + netip.AddrPortFrom(backendAddr, exposition.DefaultAdminPort).String() + "/metrics"
	f, page := expositiontest.Scrape(t, r.scrapeClient(), url)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_shim_splices_total", nil, 1},
		{"qsplice_shim_splices_refused_total", []string{"reason", "no-handshake"}, 2},
		{"qsplice_shim_control_received_total", []string{"message", "splice"}, 3},
		{"qsplice_shim_control_refused_total", []string{"reason", "replay"}, 1},
		{"qsplice_shim_control_bad_messages_total", nil, 2},
	} {
		if got := f.Counter(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if n := f.Counter(t, "qsplice_shim_control_sent_total", "message", "register"); n < 1 {
		t.Errorf("%g Registers counted, want at least the one received", n)
	}
	if got := f.Gauge(t, "qsplice_shim_registered"); got != 0 {
		t.Errorf("registered %g without a RegisterAck", got)
	}
	// The per-worker wire frames add up to the total of the same snapshot.
	wireRx := f.Counter(t, "qsplice_shim_link_frames_total", "link", "wire", "dir", "rx")
	perWorker := f.Counter(t, "qsplice_shim_worker_wire_frames_total", "worker", "0", "dir", "rx") +
		f.Counter(t, "qsplice_shim_worker_wire_frames_total", "worker", "1", "dir", "rx")
	if wireRx == 0 || perWorker != wireRx {
		t.Errorf("wire frames received: %g in all, %g over the workers", wireRx, perWorker)
	}
	if bi := f["qsplice_build_info"].GetMetric(); len(bi) != 1 || bi[0].GetGauge().GetValue() != 1 {
		t.Errorf("qsplice_build_info %v", bi)
	}
	for _, name := range []string{"process_cpu_seconds_total", "process_open_fds", "go_goroutines", "go_memstats_heap_alloc_bytes"} {
		if f[name] == nil {
			t.Errorf("no %s: the process and Go collectors are missing", name)
		}
	}
	t.Run("promtool", func(t *testing.T) { expositiontest.Promtool(t, page) })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
