package benchproxy

import (
	"math"
	"strings"
	"testing"
)

// perfStacksOutput is perf script -F pid,ip,sym output in the shape perf
// 6.x writes it: a front-end's sample delivering inside sendmmsg, one in
// the same softirq reached from an interrupt's exit (not its own send),
// one in Go code, and an nginx sample whose user frames are unknown.
const perfStacksOutput = ` 5951 
	ffffffff82059159 tcp_conn_request
	ffffffff81eafc83 process_backlog
	ffffffff81eb094e net_rx_action
	ffffffff81369c4d handle_softirqs
	ffffffff81369f44 __local_bh_enable_ip
	ffffffff81eaca84 __dev_queue_xmit
	ffffffff81e77bbb __x64_sys_sendmmsg
	ffffffff8223c951 do_syscall_64
	ffffffff81000130 entry_SYSCALL_64_after_hwframe
	          4a1b2c internal/runtime/syscall/linux.Syscall6

 5951 
	ffffffff81eb094e net_rx_action
	ffffffff81369c4d handle_softirqs
	ffffffff8136a0b5 __irq_exit_rcu
	ffffffff8223e1f0 sysvec_apic_timer_interrupt

 5951 
	          9aab00 github.com/qsplice/qsplice/splice.(*FrontEnd).Tick
	          a1c800 github.com/qsplice/qsplice/frontend.(*shard).pass

 9517 
	ffffffff81eb094e net_rx_action
	ffffffff8223c951 do_syscall_64
	          10ad6a __GI___writev
	              21 [unknown]
	    7f66931ec7f0

`

func TestParsePerfStacks(t *testing.T) {
	got, err := ParsePerfStacks(perfStacksOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]StackCounts{5951: {Samples: 3, Delivering: 1}, 9517: {Samples: 1, Delivering: 1}}
	if len(got) != len(want) || got[5951] != want[5951] || got[9517] != want[9517] {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"",
		"\n\n",
		"\tffffffff81eb094e net_rx_action\n", // a frame before any sample
		"nginx 9517\n\tffff x\n",             // comm in the header: not asked for
		" -3 \n\tffff x\n",
	} {
		if c, err := ParsePerfStacks(bad); err == nil {
			t.Errorf("%q: no error (%+v)", bad, c)
		}
	}
}

// TestDeliveryRows: the share comes from the proxy's samples for nginx
// and HAProxy and from the front-end's for qsplice; "less delivery" is
// the CPU per request without it, and its ratio compares the processes'
// own work.
func TestDeliveryRows(t *testing.T) {
	r := sampleResult()
	r.system(SystemNginx).Deliveries = []*Delivery{{Role: RoleProxy, Samples: 1000, Delivering: 150, Share: 0.15}}
	r.system(SystemQsplice).Deliveries = []*Delivery{
		{Role: RoleFrontend, Samples: 1000, Delivering: 300, Share: 0.30},
		{Role: RoleShim, Samples: 800, Delivering: 80, Share: 0.10},
	}
	r.system(SystemHAProxy).Deliveries = []*Delivery{{Role: RoleProxy, Error: "perf is not installed"}}
	byFigure := map[string]Row{}
	for _, row := range r.Rows() {
		byFigure[row.Figure] = row
	}
	share := byFigure["1K close: share delivering own sends, proxy | front-end"]
	if share.Values[SystemNginx] != 0.15 || share.Values[SystemQsplice] != 0.30 || len(share.Values) != 2 || share.Target != "" {
		t.Errorf("share row: %+v", share)
	}
	own := byFigure["1K close: CPU-us/req less delivery, proxy | front-end"]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	// nginx 28 us x 0.85, the front-end 105 us x 0.70.
	if !near(own.Values[SystemNginx], 23.8) || !near(own.Values[SystemQsplice], 73.5) || !near(own.VsNginx, 73.5/23.8) {
		t.Errorf("less-delivery row: %+v", own)
	}
	if _, ok := own.Values[SystemHAProxy]; ok {
		t.Errorf("HAProxy was not sampled but has a value: %+v", own)
	}
	table := r.Table()
	for _, want := range []string{"qsplice frontend under the 1K close load: 300 of 1000 samples", "haproxy proxy delivery share not sampled: perf is not installed"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
