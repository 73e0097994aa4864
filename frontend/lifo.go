package frontend

import (
	"time"

	"github.com/qsplice/qsplice/sched"
)

// LifoConfig configures the class-based listener policies (lifo-pri,
// eight-fifo, single-fifo). Zero fields take sched's defaults.
type LifoConfig struct {
	// Classes and their path patterns; nil means sched.DefaultClasses().
	Classes []sched.Class
	// Fallback names the class of paths no pattern matches; "" means the
	// first class.
	Fallback     string
	Upper, Lower float64
	// Interval is how often the cluster's utilization is measured and fed
	// to the policies (1 s).
	Interval     time.Duration
	SingleCap    int
	QueueTimeout time.Duration
}

// lifoControl is what the class-based policies share: one classifier of
// request paths, one utilization meter over the whole cluster, and the
// clock that ends its intervals. It is pure (time comes in), so it is
// tested without a daemon.
type lifoControl struct {
	classifier *sched.Classifier
	names      []string // class names, by classifier index
	policies   []*sched.LifoPri
	meter      *sched.UtilizationMeter
	interval   int64 // ns
	started    int64 // start of the current interval
	last       float64
}

// lifoPolicies maps a listener policy to the LifoPri mode it runs.
var lifoPolicies = map[string]sched.Mode{
	"lifo-pri":    sched.ModeLifoPri,
	"eight-fifo":  sched.ModeEightFIFO,
	"single-fifo": sched.ModeSingleFIFO,
}

func newLifoControl(cfg LifoConfig, now int64) (*lifoControl, error) {
	classes := cfg.Classes
	if classes == nil {
		classes = sched.DefaultClasses()
	}
	fallback := cfg.Fallback
	if fallback == "" && len(classes) > 0 {
		fallback = classes[0].Name
	}
	cl, err := sched.NewClassifier(classes, fallback)
	if err != nil {
		return nil, err
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = time.Second
	}
	lc := &lifoControl{classifier: cl, meter: sched.NewUtilizationMeter(0, now), interval: int64(interval), started: now}
	for _, c := range classes {
		lc.names = append(lc.names, c.Name)
	}
	return lc, nil
}

// newPolicy makes a LifoPri of the given mode sharing lc's meter.
func (lc *lifoControl) newPolicy(cfg LifoConfig, mode sched.Mode) (*sched.LifoPri, error) {
	p, err := sched.NewLifoPri(sched.LifoPriConfig{
		Classes: cfg.Classes, Upper: cfg.Upper, Lower: cfg.Lower, Mode: mode,
		SingleCap: cfg.SingleCap, QueueTimeout: cfg.QueueTimeout,
	})
	if err != nil {
		return nil, err
	}
	lc.policies = append(lc.policies, p)
	return p, nil
}

// class names the class of a request-target such as "/search?q=x".
func (lc *lifoControl) class(path string) string { return lc.names[lc.classifier.Classify(path)] }

// tick ends the utilization interval once it has lasted long enough and
// feeds the result to every policy; it reports whether one ended.
func (lc *lifoControl) tick(now int64) bool {
	if now-lc.started < lc.interval {
		return false
	}
	lc.last = lc.meter.Interval(now)
	lc.started = now
	for _, p := range lc.policies {
		p.SetUtilization(lc.last, now)
	}
	return true
}

// lifo reports whether a lifo-pri policy serves browsing newest first.
func (lc *lifoControl) lifo() bool {
	for _, p := range lc.policies {
		if p.LIFO() {
			return true
		}
	}
	return false
}

// liveSlots is the cluster's capacity for the utilization meter: the sum
// of the live back-ends' capacities.
func (d *Daemon) liveSlots() int {
	n := 0
	for _, bs := range d.backends {
		if bs.alive {
			n += d.capacity(bs)
		}
	}
	return n
}

// lifoTimers keeps the meter's capacity current and ends its intervals.
func (d *Daemon) lifoTimers(now int64) {
	if d.lifo == nil {
		return
	}
	d.lifo.meter.SetSlots(d.liveSlots(), now)
	if d.lifo.tick(now) {
		d.log.Debug("utilization", "u", d.lifo.last, "lifo", d.lifo.lifo())
	}
}

// slotStart and slotDone tell the meter a back-end slot was taken or freed.
func (d *Daemon) slotStart(now int64) {
	if d.lifo != nil {
		d.lifo.meter.Start(now)
	}
}

func (d *Daemon) slotDone(now int64) {
	if d.lifo != nil {
		d.lifo.meter.Done(now)
	}
}

// LifoStatus is the class-based policies' state in Status.
type LifoStatus struct {
	// Utilization is that of the last complete interval.
	Utilization float64 `json:"utilization"`
	// LIFO says whether lifo-pri serves browsing requests newest first.
	LIFO    bool `json:"lifo"`
	SlotsIn int  `json:"slots_in_use"`
}
