package sim

import (
	"errors"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Stall is a time during which the front-end's process does not run, as
// on a loaded machine: clients keep sending and back-ends keep serving,
// but the controller hears of nothing and runs no deadline until the
// stall ends; then it gets what came meanwhile, in order, at once.
type Stall struct {
	At, For time.Duration
}

// deferred is an engine event or a shim message held back by a stall.
type deferred struct {
	ev  splice.Event
	msg proto.Message
}

func checkStalls(stalls []Stall) error {
	for i, s := range stalls {
		if s.At < 0 || s.For <= 0 || i > 0 && s.At < stalls[i-1].At+stalls[i-1].For {
			return errors.New("sim: Stalls: each must start at >= 0, last > 0, and begin after the one before ends")
		}
	}
	return nil
}

// stalledUntil is the end of the stall t falls in, or t when none.
func (r *run) stalledUntil(t int64) int64 {
	for _, s := range r.cfg.Stalls {
		if at := s.At.Nanoseconds(); t >= at && t < at+s.For.Nanoseconds() {
			return at + s.For.Nanoseconds()
		}
	}
	return t
}

// holdForStall keeps ev or m for the end of the stall now falls in, and
// says whether it did.
func (r *run) holdForStall(ev splice.Event, m proto.Message) bool {
	if r.stalledUntil(r.now) == r.now {
		return false
	}
	r.held = append(r.held, deferred{ev: ev, msg: m})
	return true
}

// endStall hands the controller what a stall held back.
func (r *run) endStall() {
	held := r.held
	r.held = nil
	for _, d := range held {
		if d.msg != nil {
			r.control(d.msg)
		} else {
			r.event(d.ev)
		}
	}
}
