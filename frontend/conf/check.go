package conf

import (
	"fmt"
	"sort"
)

// Check looks for settings that are legal but probably not meant, in file
// order. The daemon should log them and start anyway.
func (f *File) Check() []Warning {
	var ws []Warning
	warnAt := func(line int, path, format string, args ...any) {
		ws = append(ws, Warning{File: f.Name, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	warn := func(path, format string, args ...any) { warnAt(f.line(path), path, format, args...) }
	f.checkCapacity(warn)
	f.checkLifo(warn)
	f.checkFeedback(warn)
	listed := 0
	for i, c := range f.Customers {
		if c.Implicit {
			continue
		}
		listed++
		path := index("customers", i)
		isDefault := c.Name == f.Scheduler.DefaultCustomer
		if len(c.Domains) == 0 && !isDefault {
			warn(path, "customer %q has no domains, so no request is ever classified to it", c.Name)
		}
		if c.Reservation == 0 && c.Cap == 0 && !isDefault {
			warn(path, "customer %q has no reservation and no cap: it has no guarantee and no limit", c.Name)
		}
	}
	for _, c := range f.Customers {
		if c.Implicit && listed > 0 {
			// Point at the customers list when the name is the default.
			line := f.line("scheduler.default_customer")
			if line == 0 {
				line = f.line("customers")
			}
			warnAt(line, "scheduler.default_customer", "default customer %q is not in customers; "+
				"it was added with no domains, no reservation, no cap and weight 1", c.Name)
		}
	}
	if limited := f.anyLimits(); limited != "" {
		for i, l := range f.Listeners {
			if l.Policy != PolicyCredit {
				warn(index("listeners", i)+".policy", "policy %s on %s:%d ignores %s", l.Policy, l.VIP, l.Port, limited)
			}
		}
	}
	if s := f.Scheduler; s.QueueTimeout < s.TypicalServiceTime {
		warn("scheduler.queue_timeout", "%v is shorter than typical_service_time %v: queued requests will mostly time out",
			s.QueueTimeout, s.TypicalServiceTime)
	}
	f.checkLifetime(warn)
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Line < ws[j].Line })
	return ws
}

// checkLifetime warns when a request may still wait in a queue when its
// connection's lifetime ends: the client then gets a reset instead of
// the queue timeout's 503.
func (f *File) checkLifetime(warn func(path, format string, args ...any)) {
	if f.TCP.FlowLifetime <= 0 {
		return
	}
	wait, path := f.Scheduler.QueueTimeout, "scheduler.queue_timeout"
	for i, l := range f.Listeners {
		t := l.QueueTimeout
		switch {
		case t > 0:
		case l.Policy == PolicyFIFO:
			t = DefaultFIFOQueueTimeout
		case l.Policy.UsesClasses():
			t = f.Lifo.QueueTimeout
		case l.Policy == PolicyFeedback:
			t = f.Feedback.Policy.QueueTimeout
		}
		if t > wait {
			wait, path = t, index("listeners", i)
		}
	}
	if f.TCP.HeadTimeout+wait >= f.TCP.FlowLifetime {
		warn("tcp.flow_lifetime", "%v leaves no time to answer a request that took head_timeout %v to arrive and waited %v (%s): "+
			"its client gets a reset instead of a 503", f.TCP.FlowLifetime, f.TCP.HeadTimeout, wait, path)
	}
}

// checkCapacity compares the reservations with what the cluster can serve:
// backends.expected x concurrency_cap requests in flight, each taking
// typical_service_time.
func (f *File) checkCapacity(warn func(path, format string, args ...any)) {
	var reserved float64
	for _, c := range f.Customers {
		reserved += c.Reservation
	}
	if reserved == 0 {
		return
	}
	b := f.Backends
	if b.Expected == 0 || b.ConcurrencyCap == 0 {
		warn("backends", "reservations add up to %g req/s but capacity is unknown: "+
			"set backends.expected and backends.concurrency_cap to have them checked", reserved)
		return
	}
	capacity := float64(b.Expected*b.ConcurrencyCap) / f.Scheduler.TypicalServiceTime.Seconds()
	if reserved > capacity {
		warn("customers", "reservations add up to %g req/s, more than the estimated capacity of %g req/s "+
			"(backends.expected %d x concurrency_cap %d / typical_service_time %v)",
			reserved, capacity, b.Expected, b.ConcurrencyCap, f.Scheduler.TypicalServiceTime)
	}
}

// anyLimits says which per-customer settings a FIFO listener would
// ignore, or "" when no customer has any.
func (f *File) anyLimits() string {
	for _, c := range f.Customers {
		if c.Reservation > 0 || c.Cap > 0 {
			return "the customers' reservations and caps"
		}
	}
	return ""
}

// line finds where path (or, failing that, its closest recorded parent)
// is written; 0 when the setting is not in the file.
func (f *File) line(path string) int {
	for path != "" {
		if l, ok := f.lines[path]; ok {
			return l
		}
		cut := len(path) - 1
		for cut > 0 && path[cut] != '.' && path[cut] != '[' {
			cut--
		}
		path = path[:cut]
	}
	return 0
}
