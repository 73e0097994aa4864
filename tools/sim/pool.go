package sim

import (
	"cmp"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Pooled handoff connections (Config.PoolC2), as splice/fe_pool.go keeps
// them: per back-end, newest first, at most PoolPerBackend, each for at
// most PoolIdle.
//
// The timing, from dispatch at D with c = ControlDelay: the C2 is up
// already, so the Splice (with Reuse) leaves at D and nothing waits for a
// SYN-ACK. The shim moves the C2 as the Splice reaches it, at D + c, and
// its SpliceAck is back at D + 2c, when the request goes. An early
// request leaves with the Splice at D, and the shim holds it until the
// Splice has moved the C2; the server's ACK of it, which the shim copies
// to the front-end, stands for the SpliceAck (splice.EvSpliceTaken) at D
// + 2c. A C2 goes back to its pool when the Feedback of its request
// reaches the front-end and the connection ends: the simulated client
// has its whole response by then.

// HandoffCounts counts requests dispatched by the handoff connection
// they went on.
type HandoffCounts struct {
	New    int // a connection of their own, with its handshake
	Reused int // a pooled connection (Config.PoolC2)
}

// splice.FrontEndConfig's defaults.
const (
	defaultPoolPerBackend = 64
	defaultPoolIdle       = 30 * time.Second
)

// takePooled takes the newest of back-end b's pooled C2s, after dropping
// those idle for PoolIdle (the engine resets them), and reports whether
// there was one.
func (r *run) takePooled(b uint32) bool {
	if !r.cfg.PoolC2 {
		return false
	}
	idle := cmp.Or(r.cfg.PoolIdle, defaultPoolIdle).Nanoseconds()
	pool := r.pools[b-1]
	for len(pool) > 0 && r.now-pool[0] >= idle { // oldest first
		pool = pool[1:]
	}
	r.pools[b-1] = pool
	if len(pool) == 0 {
		return false
	}
	r.pools[b-1] = pool[:len(pool)-1]
	return true
}

// pool keeps flow f's C2, whose request was served to its end, for the
// next request to its back-end, if the pool has room.
func (r *run) pool(f *simFlow) {
	if !r.cfg.PoolC2 || f.rewritten {
		return
	}
	if p := r.pools[f.backend-1]; len(p) < cmp.Or(r.cfg.PoolPerBackend, defaultPoolPerBackend) {
		r.pools[f.backend-1] = append(p, r.now)
	}
}

// reuseSplice reports flow id's Splice on a pooled C2, at dispatch: the
// C2 is up, so the flow waits for its SpliceAck at once.
func (r *run) reuseSplice(id splice.FlowID, f *simFlow, out *splice.Output) {
	f.reused, f.state, f.synAckAt = true, flowSpliceWait, r.now
	out.Events = append(out.Events, splice.Event{Kind: splice.EvSplice, Flow: id, Backend: f.backend,
		Splice: proto.Splice{RequestID: uint64(id), Reuse: proto.SpliceReuse{On: true}}})
}

// countHandoff counts flow f's dispatch in the window.
func (r *run) countHandoff(f *simFlow) {
	if !r.inWindow(r.now) {
		return
	}
	if f.reused {
		r.handoffs.Reused++
	} else {
		r.handoffs.New++
	}
}
