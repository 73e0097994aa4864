package frontend

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/internal/exposition/expositiontest"
)

// renderMetrics is st as /metrics shows it (the front-end's own
// families only), checked by a pedantic registry.
func renderMetrics(t *testing.T, st *Status) string {
	t.Helper()
	_, text := expositiontest.Gather(t, statusCollector{snapshot: func() (Status, bool) { return *st, true }})
	return string(text)
}

func histogramOf(d ...time.Duration) controller.Histogram {
	var h controller.Histogram
	for _, v := range d {
		h.Observe(v)
	}
	return h
}

// Every family of a snapshot, parsed back with the Prometheus text
// parser, has its type, labels and the snapshot's values; the service
// time sum is the one the controller kept, not mean x served.
func TestMetricsParseBack(t *testing.T) {
	st := Status{
		Drops:         map[string]uint64{"bad-cookie": 3, "no-flow": 9},
		Reloads:       2,
		ReloadsFailed: 1,
		BadCtl:        4,
		KernelDrops:   6,
		VNetRefused:   1,
		Engine:        EngineStatus{RxFrames: 100, TxFrames: 90, SynCookiesSent: 12, Accepted: 8, Requests: 7, HandoffsDone: 5, HandoffsFailed: 1, Answered: map[string]uint64{"503": 2}},
		Uptime:        1,
		Limits:        LimitsStatus{MaxFlows: 200000},
	}
	st.Status = controller.Status{
		Refunds: 1, Queue: 3, ControlRefused: map[string]uint64{"replay": 5},
		Customers: []controller.CustomerStatus{{
			Name: "main", Offered: 10, Admitted: 7, Served: 6, Balance: -1.5, Charged: 6.25, Queued: 3,
			Rejected: map[string]uint64{"queue-full": 2},
			Wait:     histogramOf(time.Millisecond, 15*time.Millisecond, 15*time.Millisecond, 3*time.Second),
			Response: histogramOf(20 * time.Millisecond),
		}},
		Backends: []controller.BackendStatus{{
			ID: 7, Alive: true, Capacity: 4, Active: 2, Served: 3, Dispatched: 4,
			MeanServiceMs:  999, // a mean that does not match the sum: the sum is exported
			ServiceSeconds: 0.03,
			Service:        histogramOf(10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond),
			Handoff:        histogramOf(2 * time.Millisecond),
			Slot:           histogramOf(40 * time.Millisecond),
		}},
		Lifo: &controller.LifoStatus{Utilization: 0.5, LIFO: true},
		Feedback: &controller.FeedbackStatus{Adapting: true, Trees: 3, U: 0.87, G: 2.25, Sessions: 11,
			Completions: 870, Bytes: 5_000_000,
			Classes: []controller.FeedbackClassStatus{{
				Name: "gold", Weight: 3, Share: 0.5, Queued: 48, Reserve: 7, TargetQueue: 50, PassProbability: 0.75,
				ProQoS: 0.46, Arrived: 900, Dispatched: 850, Refused: 20, Overload: 5, Full: 1, Expired: 2,
				PassSession: 1, PassTransactional: 0.9, G: 2.5, Displaced: 4,
				Trees: []uint64{0, 100, 200, 550},
			}},
		},
	}
	f, _ := expositiontest.Gather(t, statusCollector{snapshot: func() (Status, bool) { return st, true }})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_frontend_frames_total", []string{"dir", "rx"}, 100},
		{"qsplice_frontend_drops_total", []string{"reason", "no-flow"}, 9},
		{"qsplice_frontend_control_refused_total", []string{"reason", "replay"}, 5},
		{"qsplice_frontend_requests_total", nil, 7},
		{"qsplice_frontend_handoffs_total", []string{"outcome", "failed"}, 1},
		{"qsplice_frontend_refunds_total", nil, 1},
		{"qsplice_frontend_link_kernel_drops_total", nil, 6},
		{"qsplice_frontend_reloads_total", []string{"outcome", "ok"}, 2},
		{"qsplice_frontend_reloads_total", []string{"outcome", "failed"}, 1},
		{"qsplice_frontend_control_bad_messages_total", nil, 4},
		{"qsplice_frontend_syn_cookies_total", []string{"outcome", "sent"}, 12},
		{"qsplice_frontend_syn_cookies_total", []string{"outcome", "accepted"}, 8},
		{"qsplice_frontend_syn_cookies_total", []string{"outcome", "invalid"}, 3},
		{"qsplice_frontend_answered_total", []string{"status", "503"}, 2},
		{"qsplice_frontend_vnet_refused_total", nil, 1},
		{"qsplice_customer_served_total", []string{"customer", "main"}, 6},
		{"qsplice_customer_rejected_total", []string{"customer", "main", "reason", "queue-full"}, 2},
		{"qsplice_customer_charged_credits_total", []string{"customer", "main"}, 6.25},
		{"qsplice_backend_served_total", []string{"backend", "7"}, 3},
		{"qsplice_backend_service_seconds_total", []string{"backend", "7"}, 0.03},
		{"qsplice_backend_dispatched_total", []string{"backend", "7"}, 4},
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
		{"qsplice_frontend_queue_length", nil, 3},
		{"qsplice_frontend_limit", []string{"limit", "max_flows"}, 200000},
		{"qsplice_customer_balance_credits", []string{"customer", "main"}, -1.5},
		{"qsplice_customer_queued", []string{"customer", "main"}, 3},
		{"qsplice_backend_alive", []string{"backend", "7"}, 1},
		{"qsplice_backend_capacity", []string{"backend", "7"}, 4},
		{"qsplice_lifo_utilization", nil, 0.5},
		{"qsplice_lifo_browsing_lifo", nil, 1},
		{"qsplice_feedback_queue", []string{"class", "gold"}, 48},
		{"qsplice_feedback_reserve", []string{"class", "gold"}, 7},
		{"qsplice_feedback_target_queue", []string{"class", "gold"}, 50},
		{"qsplice_feedback_pass_probability", []string{"class", "gold"}, 0.75},
		{"qsplice_feedback_pro_qos", []string{"class", "gold"}, 0.46},
		{"qsplice_feedback_target_share", []string{"class", "gold"}, 0.5},
		{"qsplice_feedback_utilization", nil, 0.87},
		{"qsplice_feedback_g", nil, 2.25},
		{"qsplice_feedback_trees", nil, 3},
		{"qsplice_feedback_sessions", nil, 11},
		{"qsplice_feedback_pass_probability_session", []string{"class", "gold"}, 1},
		{"qsplice_feedback_pass_probability_transactional", []string{"class", "gold"}, 0.9},
		{"qsplice_feedback_class_g", []string{"class", "gold"}, 2.5},
	} {
		if got := f.Gauge(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	// The feedback policy's counters: what became of the class's
	// requests and the trees it was served (tree 0, a refusal, never).
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_feedback_arrived_total", []string{"class", "gold"}, 900},
		{"qsplice_feedback_dispatched_total", []string{"class", "gold"}, 850},
		{"qsplice_feedback_refused_total", []string{"class", "gold", "reason", "loop"}, 20},
		{"qsplice_feedback_refused_total", []string{"class", "gold", "reason", "overload"}, 5},
		{"qsplice_feedback_refused_total", []string{"class", "gold", "reason", "full"}, 1},
		{"qsplice_feedback_refused_total", []string{"class", "gold", "reason", "expired"}, 2},
		{"qsplice_feedback_trees_served_total", []string{"class", "gold", "tree", "1"}, 100},
		{"qsplice_feedback_trees_served_total", []string{"class", "gold", "tree", "3"}, 550},
		{"qsplice_feedback_displaced_total", []string{"class", "gold"}, 4},
		{"qsplice_feedback_completions_total", nil, 870},
		{"qsplice_feedback_response_bytes_total", nil, 5_000_000},
	} {
		if got := f.Counter(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if got := f.Labels("qsplice_feedback_trees_served_total", "tree"); len(got) != 3 {
		t.Errorf("trees served has trees %v, want 1, 2 and 3", got)
	}
	// Without a feedback listener there is no feedback family at all.
	st.Feedback = nil
	if f, _ := expositiontest.Gather(t, statusCollector{snapshot: func() (Status, bool) { return st, true }}); f["qsplice_feedback_queue"] != nil || f["qsplice_feedback_g"] != nil {
		t.Error("feedback metrics without a feedback listener")
	}
	// The wait histogram: 1 ms, 15 ms twice, 3 s; buckets cumulative.
	w := f.Histogram(t, "qsplice_customer_queue_wait_seconds", "customer", "main")
	if w.GetSampleCount() != 4 || w.GetSampleSum() < 3.030 || w.GetSampleSum() > 3.032 {
		t.Errorf("wait histogram count %d sum %g, want 4 and 3.031", w.GetSampleCount(), w.GetSampleSum())
	}
	for le, want := range map[float64]uint64{0.001: 1, 0.01: 1, 0.02: 3, 2: 3, 5: 4, 10: 4} {
		if got := expositiontest.Bucket(t, w, le); got != want {
			t.Errorf("wait bucket le=%g: %d, want %d", le, got, want)
		}
	}
	for name, b := range map[string]struct{ below, le float64 }{
		"qsplice_backend_handoff_seconds": {0.001, 0.002},
		"qsplice_backend_slot_seconds":    {0.02, 0.05},
		"qsplice_backend_service_seconds": {0.005, 0.01},
	} {
		hist := f.Histogram(t, name, "backend", "7")
		n := hist.GetSampleCount()
		if n == 0 || expositiontest.Bucket(t, hist, b.le) != n || expositiontest.Bucket(t, hist, b.below) != 0 {
			t.Errorf("%s: %d values, want all of them in the bucket le=%g: %v", name, n, b.le, hist.GetBucket())
		}
	}
	if got := f["qsplice_customer_response_seconds"].GetType(); got != dto.MetricType_HISTOGRAM {
		t.Errorf("response seconds is a %v", got)
	}
}

// A scrape the event loop does not answer fails with an HTTP error
// rather than serving counters that read as reset.
func TestMetricsScrapeFailsWithoutSnapshot(t *testing.T) {
	reg := exposition.NewRegistry(statusCollector{snapshot: func() (Status, bool) { return Status{}, false }})
	srv := httptest.NewServer(exposition.Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("scrape without a snapshot: %s, want 500", resp.Status)
	}
}

// checkHandoffMetrics scrapes a live daemon's /metrics after the one
// handoff of TestDaemonHandsOffAConnection (a 5 ms service time, one
// datagram that did not decode) and checks that what was driven is
// counted, and that promtool finds nothing wrong with the page.
func checkHandoffMetrics(t *testing.T, admin string) {
	t.Helper()
	f, page := expositiontest.Scrape(t, nil, admin+"/metrics")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qsplice_customer_served_total", []string{"customer", "A"}, 1},
		{"qsplice_backend_served_total", []string{"backend", "1"}, 1},
		{"qsplice_backend_service_seconds_total", []string{"backend", "1"}, 0.005},
		{"qsplice_frontend_refunds_total", nil, 0},
		{"qsplice_frontend_requests_total", nil, 1},
		{"qsplice_frontend_handoffs_total", []string{"outcome", "done"}, 1},
		{"qsplice_frontend_syn_cookies_total", []string{"outcome", "sent"}, 1},
		{"qsplice_frontend_syn_cookies_total", []string{"outcome", "accepted"}, 1},
		{"qsplice_frontend_control_bad_messages_total", nil, 1},
		{"qsplice_frontend_reloads_total", []string{"outcome", "ok"}, 0},
	} {
		if got := f.Counter(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if h := f.Histogram(t, "qsplice_customer_response_seconds", "customer", "A"); h.GetSampleCount() != 1 {
		t.Errorf("response histogram of A: %d values, want 1", h.GetSampleCount())
	}
	svc := f.Histogram(t, "qsplice_backend_service_seconds", "backend", "1")
	if svc.GetSampleCount() != 1 || expositiontest.Bucket(t, svc, 0.005) != 1 || expositiontest.Bucket(t, svc, 0.002) != 0 {
		t.Errorf("service histogram of back-end 1: %v, want the one 5 ms value in le=0.005", svc)
	}
	for _, name := range []string{"qsplice_backend_handoff_seconds", "qsplice_backend_slot_seconds"} {
		if n := f.Histogram(t, name, "backend", "1").GetSampleCount(); n != 1 {
			t.Errorf("%s: %d values, want 1", name, n)
		}
	}
	// qsplice_build_info and the standard collectors are served too.
	if bi := f["qsplice_build_info"].GetMetric(); len(bi) != 1 || bi[0].GetGauge().GetValue() != 1 {
		t.Errorf("qsplice_build_info %v", bi)
	}
	if got := f.Labels("qsplice_build_info", "goversion"); len(got) != 1 || got[0] == "" {
		t.Errorf("qsplice_build_info goversion %q", got)
	}
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "go_goroutines", "go_gc_duration_seconds"} {
		if f[name] == nil {
			t.Errorf("no %s: the process and Go collectors are missing", name)
		}
	}
	t.Run("promtool", func(t *testing.T) { expositiontest.Promtool(t, page) })
}
