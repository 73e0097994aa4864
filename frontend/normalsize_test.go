package frontend

import (
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// TestResponsesOutsideTheNormalSizeAreCounted: Feedback for a response
// larger than the normal-size range counts against the customer whose
// request it answered; one inside the range does not.
func TestResponsesOutsideTheNormalSizeAreCounted(t *testing.T) {
	d := newQueueDaemon(t, Config{Ports: []uint16{80}}, 0)
	d.cfg.NormalSize.Min, d.cfg.NormalSize.Max = 0, 16<<10
	d.backends[3] = &backendState{id: 3, alive: true, capacity: 5, ctl: netip.MustParseAddrPort("198.18.0.23:7401")}
	d.disp.AddBackend(3, 5, nil)
	for flow, cust := range map[splice.FlowID]string{1: "A", 2: "B"} {
		d.dispatched[flow] = 3
		d.startServing(flow, 3, sched.Request{Customer: cust}, 0)
	}
	now := time.Unix(10, 0)
	d.control(ctlMsg{msg: &proto.Feedback{BackendID: 3, RequestID: 1, ServiceTime: 20 * time.Millisecond, ResponseBytes: 64 << 20}}, now)
	d.control(ctlMsg{msg: &proto.Feedback{BackendID: 3, RequestID: 2, ServiceTime: 20 * time.Millisecond, ResponseBytes: 1 << 10}}, now)
	if a, b := d.stats("A").outsideNormal, d.stats("B").outsideNormal; a != 1 || b != 0 {
		t.Fatalf("outside normal size: A %d, B %d; want 1 and 0", a, b)
	}
	if got := d.disp.Active(3); got != 0 {
		t.Errorf("Active = %d after both Feedbacks", got)
	}
}
