package conf

import (
	"math"
	"net/netip"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/qsplice/qsplice/sched"
)

// PolicyFeedback is the listener policy of queue-length feedback control
// with proportional differentiation and content adaptation
// (sched.Feedback), configured by the feedback section.
const PolicyFeedback Policy = "feedback"

// Feedback holds the feedback section: the policy's parameters, its
// classes with their matching rules, and how sessions are recognised.
// Every optional field already holds its default.
type Feedback struct {
	// Policy is sched.Feedback's configuration, classes included
	// (sched.DefaultFeedbackClasses() when the file lists none).
	Policy sched.FeedbackConfig
	// Classifier is how requests are sorted into Policy.Classes and
	// sessions recognised; its Classes are left nil (they are Policy's).
	Classifier sched.FeedbackClassifierConfig
}

var (
	feedbackKeys = []string{"period", "target_queue", "q0", "q1", "history", "refuse_periods", "log_length",
		"merge", "merge_gain", "seed", "queue_timeout", "session_cookie", "transactional_paths",
		"max_sessions", "session_idle", "fallback", "content", "classes"}
	contentKeys       = []string{"trees", "a", "b", "target_utilization", "gain", "quality_gain", "tree_path", "g_step"}
	feedbackClassKeys = []string{"name", "weight", "target_queue", "queue_capacity", "reserve_capacity",
		"hosts", "paths", "subnets", "cookies"}
)

func (d *decoder) feedback(f *File, n *yaml.Node) {
	m := d.section(n, "feedback", feedbackKeys)
	if m == nil {
		m = map[string]*yaml.Node{}
	}
	p := &f.Feedback.Policy
	p.Period = d.duration(m["period"], "feedback.period", sched.DefaultFeedbackPeriod, true)
	if p.Period < time.Millisecond {
		d.errorf(m["period"].Line, "feedback.period", "%v is below 1ms", p.Period)
		p.Period = sched.DefaultFeedbackPeriod
	}
	p.TargetQueue = d.integer(m["target_queue"], "feedback.target_queue", sched.DefaultFeedbackTargetQueue, 1, 1_000_000)
	p.Q0 = d.signed(m["q0"], "feedback.q0", sched.DefaultFeedbackQ0)
	p.Q1 = d.signed(m["q1"], "feedback.q1", sched.DefaultFeedbackQ1)
	// The loop is stable exactly when both roots of
	// z^2 + (q0-2)z + (1+q1) lie inside the unit circle.
	if p.Q1 <= -2 || p.Q1 >= 0 {
		d.errorf(lineOf(m["q1"], n), "feedback.q1", "%g makes the loop unstable: need -2 < q1 < 0", p.Q1)
		p.Q1 = sched.DefaultFeedbackQ1
	}
	if p.Q0+p.Q1 <= 0 || p.Q0-p.Q1 >= 4 {
		d.errorf(lineOf(m["q0"], n), "feedback.q0", "%g with q1 %g makes the loop unstable: need q0+q1 > 0 and q0-q1 < 4", p.Q0, p.Q1)
		p.Q0, p.Q1 = sched.DefaultFeedbackQ0, sched.DefaultFeedbackQ1
	}
	p.History = d.integer(m["history"], "feedback.history", sched.DefaultFeedbackHistory, 1, 1000)
	p.RefusePeriods = d.integer(m["refuse_periods"], "feedback.refuse_periods", sched.DefaultFeedbackRefusePeriods, 1, 1000)
	p.LogLength = d.integer(m["log_length"], "feedback.log_length", sched.DefaultFeedbackLogLength, 1, 1_000_000)
	switch s := d.str(m["merge"], "feedback.merge", "planned"); s {
	case "planned":
		p.Merge = sched.MergePlanned
	case "per-request":
		p.Merge = sched.MergePerRequest
	default:
		d.errorf(m["merge"].Line, "feedback.merge", "%q is not a merge (known: planned, per-request)", s)
	}
	p.MergeGain = d.number(m["merge_gain"], "feedback.merge_gain", sched.DefaultFeedbackMergeGain, true)
	if p.MergeGain > 1 {
		d.errorf(m["merge_gain"].Line, "feedback.merge_gain", "%g is above 1", p.MergeGain)
		p.MergeGain = sched.DefaultFeedbackMergeGain
	}
	p.Seed = uint64(d.integer(m["seed"], "feedback.seed", 1, 0, math.MaxInt))
	p.QueueTimeout = d.duration(m["queue_timeout"], "feedback.queue_timeout", sched.DefaultFeedbackQueueTimeout, true)
	if wait := time.Duration(p.RefusePeriods) * p.Period; p.QueueTimeout <= wait {
		d.errorf(lineOf(m["queue_timeout"], n), "feedback.queue_timeout", "%v must exceed refuse_periods x period (%v): "+
			"the loop refuses requests explicitly, the timeout is only a safety net", p.QueueTimeout, wait)
	}
	d.content(p, m["content"])

	c := &f.Feedback.Classifier
	c.SessionCookie = d.str(m["session_cookie"], "feedback.session_cookie", "")
	if strings.ContainsAny(c.SessionCookie, "=; \t,\"") {
		d.errorf(m["session_cookie"].Line, "feedback.session_cookie", "%q is not a cookie name", c.SessionCookie)
		c.SessionCookie = ""
	}
	if tp := m["transactional_paths"]; !absent(tp) {
		seen := map[string]string{}
		for j, item := range d.sequence(tp, "feedback.transactional_paths") {
			if pat, ok := d.pattern(item, index("feedback.transactional_paths", j), seen); ok {
				c.TransactionalPaths = append(c.TransactionalPaths, pat)
			}
		}
	}
	c.MaxSessions = d.integer(m["max_sessions"], "feedback.max_sessions", sched.DefaultMaxSessions, 1, 100_000_000)
	c.SessionIdle = d.duration(m["session_idle"], "feedback.session_idle", sched.DefaultSessionIdle, true)
	d.feedbackClasses(f, m["classes"])
	c.Fallback = p.Classes[len(p.Classes)-1].Name
	if fb := m["fallback"]; !absent(fb) {
		name := d.str(fb, "feedback.fallback", "")
		found := false
		for _, cl := range p.Classes {
			found = found || cl.Name == name
		}
		if found {
			c.Fallback = name
		} else {
			d.errorf(fb.Line, "feedback.fallback", "%q is not one of the feedback classes", name)
		}
	}
}

// content decodes the content adaptation: trees and the calibration of
// the utilization.
func (d *decoder) content(p *sched.FeedbackConfig, n *yaml.Node) {
	m := d.section(n, "feedback.content", contentKeys)
	if m == nil {
		m = map[string]*yaml.Node{}
	}
	p.Trees = d.integer(m["trees"], "feedback.content.trees", sched.DefaultFeedbackTrees, 1, 255)
	p.A = d.number(m["a"], "feedback.content.a", 0, false)
	p.B = d.number(m["b"], "feedback.content.b", 0, false)
	p.Utilization = d.number(m["target_utilization"], "feedback.content.target_utilization", sched.DefaultFeedbackUtilization, true)
	if p.Utilization > 1 {
		d.errorf(m["target_utilization"].Line, "feedback.content.target_utilization", "%g is above 1", p.Utilization)
		p.Utilization = sched.DefaultFeedbackUtilization
	}
	p.Gain = d.number(m["gain"], "feedback.content.gain", sched.DefaultFeedbackGain, true)
	p.QualityGain = d.signed(m["quality_gain"], "feedback.content.quality_gain", sched.DefaultFeedbackQualityGain)
	// sched reads 0 as "the default", so a 0 written here would not mean
	// what it says; a negative gain is the way to one quality for all.
	if p.QualityGain == 0 || p.QualityGain > 1 {
		d.errorf(m["quality_gain"].Line, "feedback.content.quality_gain",
			"%g is not in (0, 1]; a negative value serves every class at one quality", p.QualityGain)
		p.QualityGain = sched.DefaultFeedbackQualityGain
	}
	p.TreePath = d.str(m["tree_path"], "feedback.content.tree_path", sched.DefaultFeedbackTreePath)
	if err := sched.CheckTreePath(p.TreePath); err != nil {
		d.errorf(m["tree_path"].Line, "feedback.content.tree_path", "%q %v (e.g. %q)", p.TreePath, err, sched.DefaultFeedbackTreePath)
		p.TreePath = sched.DefaultFeedbackTreePath
	}
	switch step := d.str(m["g_step"], "feedback.content.g_step", "dispatch"); step {
	case "dispatch":
	case "period":
		p.GStepPerPeriod = true
	default:
		d.errorf(m["g_step"].Line, "feedback.content.g_step", "%q: want dispatch (G moves with each dispatch) or period (one step a period, the published law)", step)
	}
}

// feedbackClasses decodes the priority classes and their rules.
func (d *decoder) feedbackClasses(f *File, n *yaml.Node) {
	p := &f.Feedback.Policy
	if absent(n) {
		p.Classes = sched.DefaultFeedbackClasses()
		for i := range p.Classes {
			p.Classes[i].TargetQueue = p.TargetQueue
			p.Classes[i].QueueCap = sched.DefaultFeedbackQueueCap
			p.Classes[i].ReserveCap = sched.DefaultFeedbackReserveCap
		}
		return
	}
	items := d.sequence(n, "feedback.classes")
	nameAt := map[string]int{}
	pathAt := map[string]string{}
	for i, it := range items {
		path := index("feedback.classes", i)
		m := d.mapping(it, path, feedbackClassKeys)
		if m == nil {
			continue
		}
		var c sched.FeedbackClass
		if nn := d.require(m, path, "name", it.Line); nn != nil {
			c.Name = d.uniqueName(nn, path+".name", "feedback.classes", nameAt, i)
		}
		c.Weight = 1
		if w := d.require(m, path, "weight", it.Line); w != nil {
			c.Weight = d.number(w, path+".weight", 1, true)
		}
		c.TargetQueue = d.integer(m["target_queue"], path+".target_queue", p.TargetQueue, 1, 1_000_000)
		c.QueueCap = d.integer(m["queue_capacity"], path+".queue_capacity", sched.DefaultFeedbackQueueCap, 1, math.MaxInt32)
		c.ReserveCap = d.integer(m["reserve_capacity"], path+".reserve_capacity", sched.DefaultFeedbackReserveCap, 1, math.MaxInt32)
		d.scalars(m["hosts"], path+".hosts", func(s string, line int, hpath string) {
			dom, msg := normaliseDomain(s)
			if msg != "" {
				d.errorf(line, hpath, "%s", msg)
				return
			}
			c.Hosts = append(c.Hosts, dom)
		})
		if ps := m["paths"]; !absent(ps) {
			for j, item := range d.sequence(ps, path+".paths") {
				if pat, ok := d.pattern(item, index(path+".paths", j), pathAt); ok {
					c.Paths = append(c.Paths, pat)
				}
			}
		}
		d.scalars(m["subnets"], path+".subnets", func(s string, line int, spath string) {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				d.errorf(line, spath, "%q is not a subnet (write it like \"198.18.1.0/24\")", s)
				return
			}
			c.Subnets = append(c.Subnets, pfx.Masked())
		})
		d.scalars(m["cookies"], path+".cookies", func(s string, line int, cpath string) {
			name, value, found := strings.Cut(s, "=")
			if !found || name == "" || strings.ContainsAny(name, "; \t,\"") || strings.ContainsAny(value, "; \t,") {
				d.errorf(line, cpath, "%q is not \"name=value\"", s)
				return
			}
			c.Cookies = append(c.Cookies, s)
		})
		p.Classes = append(p.Classes, c)
	}
	if len(p.Classes) == 0 {
		if n.Kind == yaml.SequenceNode {
			d.errorf(n.Line, "feedback.classes", "at least one class is required (leave the section out for gold, silver and bronze)")
		}
		p.Classes = sched.DefaultFeedbackClasses()
	}
}

// lineOf is the line of n, or of the section holding it when absent.
func lineOf(n, section *yaml.Node) int {
	if n != nil {
		return n.Line
	}
	if section != nil {
		return section.Line
	}
	return 0
}

// usesFeedback reports whether some listener has policy feedback.
func (f *File) usesFeedback() bool {
	for _, l := range f.Listeners {
		if l.Policy == PolicyFeedback {
			return true
		}
	}
	return false
}

// checkFeedback warns about feedback settings that do nothing.
func (f *File) checkFeedback(warn func(path, format string, args ...any)) {
	if !f.usesFeedback() {
		if f.line("feedback") > 0 {
			warn("feedback", "no listener has policy feedback, so feedback is not used")
		}
		return
	}
	p := f.Feedback.Policy
	if p.Trees > 1 && p.A == 0 && p.B == 0 {
		warn("feedback.content", "%d content trees but a and b are 0: content adaptation is off and every request gets tree %d "+
			"(run qsplice-calibrate and set a and b)", p.Trees, p.Trees)
	}
	rules := 0
	for _, c := range p.Classes {
		rules += len(c.Hosts) + len(c.Paths) + len(c.Subnets) + len(c.Cookies)
	}
	if rules == 0 && len(p.Classes) > 1 {
		warn("feedback.classes", "no class has hosts, paths, subnets or cookies: every request goes to %q", f.Feedback.Classifier.Fallback)
	}
}
