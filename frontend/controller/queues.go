package controller

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// queueSet is one scheduling policy and the request it handed out with
// Next that found no back-end yet.
type queueSet struct {
	name   string
	policy sched.Policy
	head   sched.Request
	// hasHead: head holds a request the policy no longer does.
	hasHead bool
	// lifo is policy when it is a class-based one: its requests are
	// classified by path, not by Host.
	lifo *sched.LifoPri
	// credit: policy is the credit scheduler, which corrects charges
	// from Feedback and takes refunds.
	credit bool
	// feedback is policy when it is the feedback policy: its requests are
	// classified by its own classifier, and its drops carry a reason.
	feedback *sched.Feedback
	// timeout is the policy's queue timeout; it also expires head, which
	// the policy no longer holds.
	timeout time.Duration
	// ports are the listener ports whose requests it queues.
	ports []uint16
}

// expirer is a policy with a queue timeout (Credit, LifoPri, FIFO).
type expirer interface {
	Expire(now int64, f func(sched.Request))
	NextExpiry() (int64, bool)
}

// nextExpiry is when a request of q, or its head, first outstays the
// queue timeout.
func (q *queueSet) nextExpiry() (splice.Time, bool) {
	next, ok := splice.Never, false
	if e, is := q.policy.(expirer); is {
		if t, has := e.NextExpiry(); has {
			next, ok = splice.Time(t), true
		}
	}
	if q.hasHead && q.timeout > 0 {
		next, ok = min(next, splice.Time(q.head.Arrival).Add(q.timeout)+1), true
	}
	return next, ok
}

type queues struct {
	list   []*queueSet
	byPort map[uint16]*queueSet
	credit *sched.Credit
	lifo   *lifoControl // nil when no listener classifies by path
	// feedback is the feedback listeners' shared policy; nil without them.
	feedback *feedbackControl
}

// buildQueues creates the policies the listeners ask for: one credit
// scheduler shared by every credit listener (customers are global), one
// LifoPri per class-based policy in use (lifo-pri, eight-fifo,
// single-fifo), sharing one classifier and utilization meter, and one FIFO
// for the rest. now starts the meter's first interval.
func buildQueues(cfg *Config, now int64) (queues, error) {
	qs := queues{byPort: make(map[uint16]*queueSet)}
	var credit *queueSet
	// FIFO and class-based queues are shared by the listeners of the same
	// policy and queue timeout.
	type policyKey struct {
		policy  string
		timeout time.Duration
	}
	shared := map[policyKey]*queueSet{}
	get := func(policy string, timeout time.Duration) (*queueSet, error) {
		if mode, ok := lifoPolicies[policy]; ok {
			if timeout <= 0 {
				timeout = cfg.Lifo.QueueTimeout
			}
			k := policyKey{policy, timeout}
			if q := shared[k]; q != nil {
				return q, nil
			}
			if qs.lifo == nil {
				lc, err := newLifoControl(cfg.Lifo, now)
				if err != nil {
					return nil, err
				}
				qs.lifo = lc
			}
			lcfg := cfg.Lifo
			lcfg.QueueTimeout = timeout
			p, err := qs.lifo.newPolicy(lcfg, mode)
			if err != nil {
				return nil, err
			}
			q := &queueSet{name: policy, policy: p, lifo: p, timeout: timeout}
			shared[k] = q
			qs.list = append(qs.list, q)
			return q, nil
		}
		switch policy {
		case "feedback":
			return qs.feedbackQueue(cfg, int64(timeout))
		case "credit":
			if timeout > 0 && timeout != cfg.Credit.QueueTimeout {
				return nil, fmt.Errorf("credit listeners share the credit scheduler's queue timeout (%v), not %v", cfg.Credit.QueueTimeout, timeout)
			}
			if credit == nil {
				c, err := sched.NewCredit(cfg.Credit)
				if err != nil {
					return nil, err
				}
				credit = &queueSet{name: "credit", policy: c, credit: true, timeout: cfg.Credit.QueueTimeout}
				qs.credit = c
				qs.list = append(qs.list, credit)
			}
			return credit, nil
		case "fifo", "":
			if timeout <= 0 {
				timeout = cfg.QueueTimeout
			}
			k := policyKey{"fifo", timeout}
			if q := shared[k]; q != nil {
				return q, nil
			}
			q := &queueSet{name: "fifo", policy: sched.NewFIFOWithTimeout(cfg.QueueCapacity, timeout), timeout: timeout}
			shared[k] = q
			qs.list = append(qs.list, q)
			return q, nil
		}
		return nil, fmt.Errorf("listener policy %q is not credit, fifo, lifo-pri, eight-fifo, single-fifo or feedback", policy)
	}
	for _, l := range cfg.Listeners {
		q, err := get(l.Policy, l.QueueTimeout)
		if err != nil {
			return qs, fmt.Errorf("listener %d: %w", l.Port, err)
		}
		qs.byPort[l.Port] = q
		q.ports = append(q.ports, l.Port)
	}
	for _, p := range cfg.Ports {
		if qs.byPort[p] == nil {
			q, _ := get("fifo", 0)
			qs.byPort[p] = q
			q.ports = append(q.ports, p)
		}
	}
	return qs, nil
}

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
// end of its current interval.
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

// lifo reports whether a lifo-pri policy serves browsing newest first.
func (lc *lifoControl) lifo() bool {
	for _, p := range lc.policies {
		if p.LIFO() {
			return true
		}
	}
	return false
}

// lifoTick ends the utilization interval once it has lasted long enough
// and feeds the result to every class-based policy.
func (c *Controller) lifoTick(now splice.Time, out *Output) {
	lc := c.lifo
	if lc == nil || int64(now)-lc.started < lc.interval {
		return
	}
	lc.last = lc.meter.Interval(int64(now))
	lc.started = int64(now)
	for _, p := range lc.policies {
		p.SetUtilization(lc.last, int64(now))
	}
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "utilization", "u", lc.last, "lifo", lc.lifo())
	}
}

// updateSlots tells the meter the cluster's capacity: the live
// back-ends' slots. It runs whenever liveness or a capacity changes.
func (c *Controller) updateSlots(now splice.Time) {
	if c.lifo == nil {
		return
	}
	n := 0
	for _, be := range c.order {
		if be.alive {
			n += c.capacity(be)
		}
	}
	c.lifo.meter.SetSlots(n, int64(now))
}

// slotStart and slotDone tell the meter a back-end slot was taken or freed.
func (c *Controller) slotStart(now splice.Time) {
	if c.lifo != nil {
		c.lifo.meter.Start(int64(now))
	}
}

func (c *Controller) slotDone(now splice.Time) {
	if c.lifo != nil {
		c.lifo.meter.Done(int64(now))
	}
}
