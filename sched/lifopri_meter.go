package sched

import "time"

// UtilizationMeter measures the utilization that drives LifoPri's switch
// between FIFO and LIFO service of browsing queues: busy time over
// capacity per interval,
//
//	U = (sum over back-ends of the time each of their C slots was busy
//	     during the interval) / (number of back-ends x C x interval length)
//
// where C is how many requests a back-end serves at once. A slot is busy
// from the moment a request is sent to the back-end until the back-end
// reports the response finished (in the front-end: from the request's
// sending on C2, which may come after the handoff was set up ahead, to
// the shim's Feedback; in the simulator, from dispatch to completion). U is 0 for an idle cluster and 1 for one
// whose every slot was busy all the time; requests waiting in queues do
// not count, so U says how much of the cluster's capacity is in use, not
// how overloaded it is.
//
// The meter integrates both the number of busy slots and the number of
// slots over time, so requests that straddle an interval boundary are
// split between the intervals exactly, and back-ends that come and go in
// the middle of an interval count for the part they were there. Feed it
// either with Start/Done as requests are dispatched and completed (what
// the front-end and the simulator both see), or with Busy when busy time
// arrives already summed (a back-end reporting per interval), not both
// for the same requests. Call Interval at the end of each interval and
// pass its result to LifoPri.SetUtilization.
//
// Like the policies it is pure: time comes in as ns on the caller's
// clock, and a clock that steps back counts as not moving.
type UtilizationMeter struct {
	slots   int     // back-ends x C, now
	busy    int     // slots busy now
	last    int64   // when the integrals were last brought up to date
	busyNs  float64 // slot-ns busy in the current interval, from Start/Done
	capNs   float64 // slot-ns available in the current interval
	addedNs float64 // slot-ns busy reported through Busy
}

// NewUtilizationMeter returns a meter for slots = back-ends x C slots whose
// first interval starts at now.
func NewUtilizationMeter(slots int, now int64) *UtilizationMeter {
	return &UtilizationMeter{slots: max(slots, 0), last: now}
}

// advance brings the busy and capacity integrals up to now.
func (m *UtilizationMeter) advance(now int64) {
	if now <= m.last {
		return
	}
	d := float64(now - m.last)
	m.busyNs += float64(m.busy) * d
	m.capNs += float64(m.slots) * d
	m.last = now
}

// SetSlots changes the number of slots (back-ends x C) from now on, when a
// back-end joins, leaves or changes its C.
func (m *UtilizationMeter) SetSlots(slots int, now int64) {
	m.advance(now)
	m.slots = max(slots, 0)
}

// Start records that a request occupied one slot at now.
func (m *UtilizationMeter) Start(now int64) {
	m.advance(now)
	m.busy++
}

// Done records that a request left its slot at now (finished, failed or
// refunded). Unmatched Done calls are ignored.
func (m *UtilizationMeter) Done(now int64) {
	m.advance(now)
	m.busy = max(m.busy-1, 0)
}

// Busy adds time for which one slot was busy during the current interval,
// as reported by a back-end; negative durations are ignored.
func (m *UtilizationMeter) Busy(slotBusy time.Duration) {
	m.addedNs += float64(max(slotBusy, 0))
}

// InUse is the number of slots busy now, by Start and Done.
func (m *UtilizationMeter) InUse() int { return m.busy }

// Interval ends the current interval at now, returns its utilization and
// starts the next one. A zero-length or zero-capacity interval gives 0.
// Busy time reported through Busy that in truth fell into an earlier
// interval can push the result above 1; Start/Done never do.
func (m *UtilizationMeter) Interval(now int64) float64 {
	m.advance(now)
	u := 0.0
	if m.capNs > 0 {
		u = (m.busyNs + m.addedNs) / m.capNs
	}
	m.busyNs, m.capNs, m.addedNs = 0, 0, 0
	return u
}
