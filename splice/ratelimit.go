package splice

// rateLimit lets events through at a steady rate with a bounded burst,
// from the engine's time alone (no clock, no timer): the generic cell
// rate algorithm, a token bucket kept as one number. tat is the
// theoretical arrival time of the next event at the steady rate; an
// event is let through when tat is no more than burst intervals ahead of
// now, and pushes tat on by one interval.
type rateLimit struct {
	interval Time // 1/rate
	slack    Time // (burst-1) intervals: how far ahead tat may run
	tat      Time
}

// newRateLimit allows perSecond events a second in the long run, and
// burst at once after a quiet spell.
func newRateLimit(perSecond, burst int) rateLimit {
	iv := Time(1e9) / Time(max(perSecond, 1))
	return rateLimit{interval: iv, slack: iv * Time(max(burst, 1)-1)}
}

// allow reports whether an event at now may happen, and counts it if so.
func (r *rateLimit) allow(now Time) bool {
	tat := max(r.tat, now)
	if tat-now > r.slack {
		return false
	}
	r.tat = tat + r.interval
	return true
}
