package sim

import (
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
)

// Sample is the controller's feedback state at one instant of a run.
type Sample struct {
	At time.Duration
	// Feedback is the feedback policy's state (nil without a feedback
	// listener): per class q, target_q, proQoS and the trees served, and
	// the content adaptation's U and G.
	Feedback *controller.FeedbackStatus
	// Queue is the number of requests waiting in every policy.
	Queue int
}

func (r *run) takeSample() {
	st := r.ctrl.Status(splice.Time(r.now))
	r.samples = append(r.samples, Sample{At: time.Duration(r.now), Feedback: st.Feedback, Queue: st.Queue})
}

// scaleByTree makes a request served from tree k of Config.Trees cost
// k/M of its service time and bytes.
func (r *run) scaleByTree(id splice.FlowID, f *simFlow) {
	m := r.cfg.Trees
	if m == 0 {
		return
	}
	tree, ok := r.ctrl.RequestTree(id)
	if !ok || int(tree) >= m {
		return
	}
	f.service = f.service * int64(tree) / int64(m)
	f.bytes = f.bytes * uint64(tree) / uint64(m)
}

// clientAddr is the address of flow id's client: one per flow, spread
// over 10.128.0.0/9 so that the content adaptor's hash sees many.
func clientAddr(id splice.FlowID) netip.AddrPort {
	n := uint32(id)
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 128 | byte(n>>16), byte(n >> 8), byte(n)}), 40000)
}
