package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// FuzzController drives the controller with arbitrary sequences of
// engine events, control messages, ticks and reloads, and checks after
// every step that each piece of state agrees with its one owner: the
// dispatcher's count per back-end is the requests in service there, a
// back-end's slots in use are its requests sent, the ready and parked
// lists hold exactly the flows that say they wait there, and time never
// leaves a deadline behind. At the end every connection closes, and
// nothing may be left.
func FuzzController(f *testing.F) {
	f.Add([]byte{7, 1, 2, 0, 0, 0, 1, 2, 1, 3, 1, 1, 4, 1, 0, 5, 2})
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 1, 3, 0, 1, 3, 1, 1, 8, 200, 6, 0, 0})
	f.Add([]byte{9, 3, 7, 1, 0, 0, 0, 0, 2, 0, 3, 0, 1, 8, 255, 8, 255, 8, 255, 5, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100, QueueCap: 4},
			sched.CustomerSpec{Name: "B", Cap: 50, QueueCap: 4})
		cfg.HandoffAhead = 1
		cfg.SlotWait = 300 * time.Millisecond
		cfg.Credit.QueueTimeout = 200 * time.Millisecond
		h := newHarness(t, cfg)
		now := t0
		var next splice.FlowID
		byte_ := func(i *int) byte {
			if *i >= len(ops) {
				return 0
			}
			b := ops[*i]
			*i++
			return b
		}
		// pick returns a flow of the fake engine in one of states, chosen
		// by b, or 0.
		pick := func(b byte, states ...string) splice.FlowID {
			var ids []splice.FlowID
			for id, f := range h.eng.flows {
				if slices.Contains(states, f.state) {
					ids = append(ids, id)
				}
			}
			if len(ids) == 0 {
				return 0
			}
			slices.Sort(ids)
			return ids[int(b)%len(ids)]
		}
		for i := 0; i < len(ops); {
			op, arg := byte_(&i)%10, byte_(&i)
			switch op {
			case 0: // a new request
				next++
				h.request(next, []string{"A.example", "B.example"}[arg%2], now)
			case 1: // a follow-up on a spliced connection
				if id := pick(arg, "spliced"); id != 0 && !h.eng.flows[id].waiting {
					h.followUp(id, "A.example", now)
				}
			case 2: // a handoff connection comes up
				if id := pick(arg, "connecting"); id != 0 {
					h.connected(id, now)
				}
			case 3: // the shim confirms (or refuses) a splice
				if id := pick(arg, "splice-wait", "connecting", "spliced"); id != 0 {
					h.control(&proto.SpliceAck{RequestID: uint64(id), BackendID: h.eng.flows[id].backend, OK: arg%5 != 0}, now)
				}
			case 4: // a Feedback
				if id := pick(arg, "spliced", "closed"); id != 0 {
					h.feedback(id, time.Duration(arg)*time.Millisecond, now)
				}
			case 5: // a connection closes
				if id := pick(arg, "queued", "connecting", "splice-wait", "held", "spliced", "answered"); id != 0 {
					h.closed(id, splice.CloseRST, now)
				}
			case 6: // a keepalive
				h.control(&proto.Keepalive{BackendID: uint32(arg%3 + 1), Incarnation: 1, Concurrency: uint16(arg % 4)}, now)
			case 7: // a (re)registration
				h.register(uint32(arg%3+1), int(arg/3%3+1), uint64(arg/9%2+1), now)
			case 8: // time passes
				now += splice.Time(arg) * 4 * ms
				h.tick(now)
				if d := h.c.NextDeadline(); d <= now {
					t.Fatalf("after Tick at %v the next deadline is %v", now-t0, d-t0)
				}
			case 9: // a reload
				next := cfg
				next.HandoffAhead, next.ConcurrencyCap = int(arg%3), int(arg/3%3)
				h.out.Reset()
				if err := h.c.Reload(next, now, &h.out); err != nil {
					t.Fatal(err)
				}
			}
			checkOwners(t, h.c)
		}
		// Every connection ends; time runs out every timer.
		for id, f := range h.eng.flows {
			if f.state != "closed" {
				h.closed(id, splice.CloseFIN, now)
			}
		}
		for range 3 {
			now += 10 * sec
			h.tick(now)
		}
		checkOwners(t, h.c)
		if len(h.c.flows) != 0 {
			t.Fatalf("%d flow records left after every connection closed", len(h.c.flows))
		}
		for _, be := range h.c.order {
			if a := h.c.disp.Active(sched.BackendID(be.id)); a != 0 || be.sent != 0 || len(be.ready) != 0 || len(be.parked) != 0 {
				t.Fatalf("back-end %d left with %d active, %d sent, %d ready, %d parked", be.id, a, be.sent, len(be.ready), len(be.parked))
			}
		}
	})
}

// checkOwners verifies that the controller's views of the same thing
// agree.
func checkOwners(t *testing.T, c *Controller) {
	t.Helper()
	for _, be := range c.order {
		var serving, sent int
		for _, rec := range c.flows {
			if rec.be != be {
				continue
			}
			serving += len(rec.serving)
			for _, r := range rec.serving {
				if r.sent {
					sent++
				}
			}
		}
		if a := c.disp.Active(sched.BackendID(be.id)); a != serving {
			t.Fatalf("back-end %d: dispatcher counts %d, %d requests in service", be.id, a, serving)
		}
		if be.sent != sent {
			t.Fatalf("back-end %d: %d slots in use, %d requests sent", be.id, be.sent, sent)
		}
		for _, r := range be.ready {
			if rec := c.flows[r.flow]; rec == nil || !rec.ready || rec.be != be {
				t.Fatalf("back-end %d: ready flow %d is %+v", be.id, r.flow, rec)
			}
		}
		for _, p := range be.parked {
			if rec := c.flows[p.flow]; rec == nil || rec.waiting != waitParked || rec.be != be {
				t.Fatalf("back-end %d: parked flow %d is %+v", be.id, p.flow, rec)
			}
		}
	}
	for id, rec := range c.flows {
		if rec.ready && !slices.ContainsFunc(rec.be.ready, func(r readyConn) bool { return r.flow == id }) {
			t.Fatalf("flow %d says it waits ready but its back-end does not hold it", id)
		}
		if rec.waiting == waitParked && !slices.ContainsFunc(rec.be.parked, func(p parkedReq) bool { return p.flow == id }) {
			t.Fatalf("flow %d says it is parked but its back-end does not hold it", id)
		}
	}
}
