package conf

import (
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/qsplice/qsplice/sched"
)

// The LIFO-Pri listener policies: URL classes in separate queues
// (sched.LifoPri), and the two baselines of the published experiment.
const (
	PolicyLifoPri    Policy = "lifo-pri"    // transaction before browsing, browsing LIFO under overload
	PolicyEightFIFO  Policy = "eight-fifo"  // the same eight queues, always FIFO
	PolicySingleFIFO Policy = "single-fifo" // one FIFO queue, counted per class
)

// UsesClasses reports whether listeners with the policy classify requests
// by URL path into the classes section instead of by Host into customers.
func (p Policy) UsesClasses() bool {
	return p == PolicyLifoPri || p == PolicyEightFIFO || p == PolicySingleFIFO
}

// Lifo holds the parameters of the class-based policies.
type Lifo struct {
	// Browsing queues turn LIFO when the cluster's utilization over one
	// Interval exceeds Upper and FIFO again below Lower.
	Upper, Lower float64
	Interval     time.Duration // how often utilization is measured and fed in
	// SingleCapacity is the queue length of single-fifo listeners.
	SingleCapacity int
	// QueueTimeout answers 503 to a request queued longer. Every queue
	// has one: a request no back-end takes must not hold its connection
	// until the engine's idle timeout.
	QueueTimeout time.Duration
}

// Defaults of the classes and lifo sections; classes default to
// sched.DefaultClasses().
const (
	DefaultLifoUpper          = sched.DefaultLifoUpper
	DefaultLifoLower          = sched.DefaultLifoLower
	DefaultLifoInterval       = time.Second
	DefaultLifoSingleCapacity = sched.DefaultSingleCap
)

var (
	classKeys = []string{"name", "kind", "utility", "queue_capacity", "patterns"}
	lifoKeys  = []string{"upper", "lower", "interval", "single_capacity", "queue_timeout"}
)

func (d *decoder) lifo(f *File, n *yaml.Node) {
	m := d.section(n, "lifo", lifoKeys)
	f.Lifo = Lifo{
		Upper:          d.number(m["upper"], "lifo.upper", DefaultLifoUpper, true),
		Lower:          d.number(m["lower"], "lifo.lower", DefaultLifoLower, true),
		Interval:       d.duration(m["interval"], "lifo.interval", DefaultLifoInterval, true),
		SingleCapacity: d.integer(m["single_capacity"], "lifo.single_capacity", DefaultLifoSingleCapacity, 1, math.MaxInt),
		QueueTimeout:   d.duration(m["queue_timeout"], "lifo.queue_timeout", DefaultLifoQueueTimeout, true),
	}
	if f.Lifo.Lower > f.Lifo.Upper {
		line := n.Line
		if l := m["lower"]; l != nil {
			line = l.Line
		}
		d.errorf(line, "lifo.lower", "%g is above upper %g", f.Lifo.Lower, f.Lifo.Upper)
	}
}

// classes decodes the URL classes. Requests whose path no pattern matches
// go to the first class listed, so it should be an entry page.
func (d *decoder) classes(f *File, n *yaml.Node) {
	if absent(n) {
		f.Classes = sched.DefaultClasses()
		return
	}
	items := d.sequence(n, "classes")
	if n.Kind == yaml.SequenceNode && len(items) == 0 {
		d.errorf(n.Line, "classes", "at least one class is required (leave the section out for the default eight)")
	}
	nameAt := make(map[string]int)
	patternAt := make(map[string]string)
	for i, it := range items {
		path := index("classes", i)
		m := d.mapping(it, path, classKeys)
		if m == nil {
			continue
		}
		var c sched.Class
		if nn := d.require(m, path, "name", it.Line); nn != nil {
			c.Name = d.uniqueName(nn, path+".name", "classes", nameAt, i)
		}
		if k := d.require(m, path, "kind", it.Line); k != nil {
			switch s := d.str(k, path+".kind", ""); s {
			case "browsing":
				c.Kind = sched.Browsing
			case "transaction":
				c.Kind = sched.Transaction
			default:
				d.errorf(k.Line, path+".kind", "%q is not a kind (known: browsing, transaction)", s)
			}
		}
		if u := d.require(m, path, "utility", it.Line); u != nil {
			c.Utility = d.number(u, path+".utility", 0, true)
		}
		c.QueueCap = d.integer(m["queue_capacity"], path+".queue_capacity", 0, 0, math.MaxInt)
		if c.QueueCap == 0 {
			c.QueueCap = sched.DefaultBrowsingCap
			if c.Kind == sched.Transaction {
				c.QueueCap = sched.DefaultTransactionCap
			}
		}
		if pn := m["patterns"]; !absent(pn) {
			for j, item := range d.sequence(pn, path+".patterns") {
				ppath := index(path+".patterns", j)
				if p, ok := d.pattern(item, ppath, patternAt); ok {
					c.Patterns = append(c.Patterns, p)
				}
			}
		}
		f.Classes = append(f.Classes, c)
	}
}

// pattern decodes one path pattern as sched.Classifier accepts it:
// "/exact" or "/prefix*", no query, each pattern in one class only.
func (d *decoder) pattern(n *yaml.Node, path string, patternAt map[string]string) (string, bool) {
	p, ok := d.scalar(n, path)
	if !ok {
		return "", false
	}
	body, _ := strings.CutSuffix(p, "*")
	msg := ""
	switch {
	case !strings.HasPrefix(p, "/"):
		msg = "must start with \"/\""
	case strings.Contains(body, "*"):
		msg = "\"*\" is only allowed at the end"
	case strings.Contains(p, "?"):
		msg = "the query string is ignored, patterns cannot contain \"?\""
	}
	if msg != "" {
		d.errorf(n.Line, path, "%q %s", p, msg)
		return "", false
	}
	if owner, dup := patternAt[p]; dup {
		d.errorf(n.Line, path, "%q is already listed at %s", p, owner)
		return "", false
	}
	patternAt[p] = path
	return p, true
}

// FallbackClass is the class of request paths no pattern matches: the
// first class listed ("main" by default).
func (f *File) FallbackClass() string {
	if len(f.Classes) == 0 {
		return ""
	}
	return f.Classes[0].Name
}

// usesClasses reports whether some listener classifies by URL.
func (f *File) usesClasses() bool {
	for _, l := range f.Listeners {
		if l.Policy.UsesClasses() {
			return true
		}
	}
	return false
}

// checkLifo warns about class settings no listener uses.
func (f *File) checkLifo(warn func(path, format string, args ...any)) {
	if f.usesClasses() {
		return
	}
	for _, key := range []string{"classes", "lifo"} {
		if f.line(key) > 0 {
			warn(key, "no listener has policy lifo-pri, eight-fifo or single-fifo, so %s is not used", key)
		}
	}
}
