package conf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The keys each mapping accepts, in the order the documentation lists
// them; unknown-key errors print them in this order.
var (
	topKeys     = []string{"link", "handoff", "admin", "control", "capture", "tcp", "backends", "scheduler", "listeners", "customers", "classes", "lifo", "feedback"}
	linkKeys    = []string{"interface", "type", "mac"}
	controlKeys = []string{"listen", "key_file"}
	tcpKeys     = []string{"linger", "idle_timeout", "head_timeout", "max_head", "cookie_seed",
		"max_flows", "max_flows_per_source", "max_ports_per_source", "flow_lifetime", "half_close_timeout"}
	backendKeys   = []string{"concurrency_cap", "expected", "handoff_ahead", "keepalive_interval", "splice_retry"}
	schedulerKeys = []string{"cycle", "typical_service_time", "normal_size", "balance_limit", "debt_limit",
		"queue_timeout", "cap_window", "queue_capacity", "retry_after", "default_customer"}
	sizeRangeKeys = []string{"min", "max"}
	listenerKeys  = []string{"vip", "port", "policy", "queue_timeout"}
	customerKeys  = []string{"name", "domains", "reservation", "cap", "weight", "queue_capacity"}
)

// Load reads the file at path and parses it. Relative control.key_file
// and capture paths are taken relative to the file's directory, so the
// daemon finds them whatever its working directory.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if !filepath.IsAbs(f.Control.KeyFile) {
		f.Control.KeyFile = filepath.Join(dir, f.Control.KeyFile)
	}
	if f.Capture != "" && !filepath.IsAbs(f.Capture) {
		f.Capture = filepath.Join(dir, f.Capture)
	}
	return f, nil
}

// Parse decodes and validates a configuration; name is used in messages
// only. On failure the error lists every problem found, one per line, as
// "name:line: key.path: message", in file order; errors.As finds *Error.
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{file: name, lines: make(map[string]int)}
	root, err := d.document(data)
	if err != nil {
		return nil, err
	}
	f := &File{Name: name}
	top := d.mapping(root, "", topKeys)
	if top == nil {
		return nil, d.sortedErrors()[0]
	}
	line := max(root.Line, 1)
	d.link(f, d.require(top, "", "link", line))
	if n := d.require(top, "", "handoff", line); n != nil {
		f.Handoff = d.ipv4(n, "handoff")
	}
	if n := top["admin"]; !absent(n) {
		f.Admin = d.addrPort(n, "admin")
	}
	d.control(f, d.require(top, "", "control", line))
	f.Capture = d.str(top["capture"], "capture", "")
	d.tcp(f, top["tcp"])
	d.backends(f, top["backends"])
	d.scheduler(f, top["scheduler"])
	d.listeners(f, d.require(top, "", "listeners", line))
	d.customers(f, top["customers"])
	d.defaultCustomer(f)
	d.classes(f, top["classes"])
	d.lifo(f, top["lifo"])
	d.feedback(f, top["feedback"])
	if errs := d.sortedErrors(); len(errs) > 0 {
		joined := make([]error, len(errs))
		for i, e := range errs {
			joined[i] = e
		}
		return nil, errors.Join(joined...)
	}
	f.lines = d.lines
	f.index()
	return f, nil
}

// yamlLine picks the line out of the YAML library's messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document and returns its top
// node; an empty document is an empty mapping.
func (d *decoder) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return &yaml.Node{Kind: yaml.MappingNode, Line: 1}, nil
	}
	if err != nil {
		return nil, d.syntaxError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &Error{File: d.file, Line: extra.Line, Message: "only one YAML document is allowed"}
	case !errors.Is(err, io.EOF):
		return nil, d.syntaxError(err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = deref(doc.Content[0])
	}
	if absent(root) {
		return &yaml.Node{Kind: yaml.MappingNode, Line: 1}, nil
	}
	return root, nil
}

func (d *decoder) syntaxError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: d.file, Line: line, Message: m[2]}
	}
	return &Error{File: d.file, Message: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// require returns m[key], reporting it missing (at the line of the
// mapping that should hold it) when it is absent.
func (d *decoder) require(m map[string]*yaml.Node, path, key string, line int) *yaml.Node {
	n := m[key]
	if absent(n) {
		if n != nil {
			line = n.Line
		}
		d.errorf(line, join(path, key), "required")
		return nil
	}
	return n
}

// section returns the keys of an optional mapping; absent means all
// defaults.
func (d *decoder) section(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	if absent(n) {
		return map[string]*yaml.Node{}
	}
	return d.mapping(n, path, known)
}

func (d *decoder) link(f *File, n *yaml.Node) {
	f.Link.Type = DefaultLinkType
	if n == nil {
		return
	}
	m := d.mapping(n, "link", linkKeys)
	if m == nil {
		return
	}
	if in := d.require(m, "link", "interface", n.Line); in != nil {
		f.Link.Interface = d.str(in, "link.interface", "")
		// The kernel's IFNAMSIZ is 16 with the terminating NUL.
		if f.Link.Interface == "" || len(f.Link.Interface) > 15 || strings.ContainsAny(f.Link.Interface, "/ \t\n:") {
			d.errorf(in.Line, "link.interface", "%q is not an interface name", f.Link.Interface)
		}
	}
	if t := m["type"]; !absent(t) {
		switch s := d.str(t, "link.type", ""); LinkType(s) {
		case LinkAFPacket, LinkTAP:
			f.Link.Type = LinkType(s)
		default:
			d.errorf(t.Line, "link.type", "%q is not a link type (known: afpacket, tap)", s)
		}
	}
	f.Link.MAC = d.mac(m["mac"], "link.mac")
}

func (d *decoder) control(f *File, n *yaml.Node) {
	if n == nil {
		return
	}
	m := d.mapping(n, "control", controlKeys)
	if m == nil {
		return
	}
	if l := d.require(m, "control", "listen", n.Line); l != nil {
		f.Control.Listen = d.addrPort(l, "control.listen")
	}
	if k := d.require(m, "control", "key_file", n.Line); k != nil {
		f.Control.KeyFile = d.str(k, "control.key_file", "")
		if f.Control.KeyFile == "" {
			d.errorf(k.Line, "control.key_file", "required")
		}
	}
}

func (d *decoder) tcp(f *File, n *yaml.Node) {
	m := d.section(n, "tcp", tcpKeys)
	f.TCP = TCP{
		Linger:      d.duration(m["linger"], "tcp.linger", DefaultLinger, true),
		IdleTimeout: d.duration(m["idle_timeout"], "tcp.idle_timeout", DefaultIdleTimeout, true),
		HeadTimeout: d.duration(m["head_timeout"], "tcp.head_timeout", DefaultHeadTimeout, true),
		MaxHead:     d.size(m["max_head"], "tcp.max_head", DefaultMaxHead, minMaxHead, maxMaxHead),
		CookieSeed:  d.str(m["cookie_seed"], "tcp.cookie_seed", ""),

		MaxFlows:          d.integer(m["max_flows"], "tcp.max_flows", DefaultMaxFlows, 0, maxCountLimit),
		MaxFlowsPerSource: d.integer(m["max_flows_per_source"], "tcp.max_flows_per_source", DefaultMaxFlowsPerSource, 0, maxCountLimit),
		MaxPortsPerSource: d.integer(m["max_ports_per_source"], "tcp.max_ports_per_source", DefaultMaxPortsPerSource, 0, maxCountLimit),
		FlowLifetime:      d.duration(m["flow_lifetime"], "tcp.flow_lifetime", DefaultFlowLifetime, true),
		HalfCloseTimeout:  d.duration(m["half_close_timeout"], "tcp.half_close_timeout", DefaultHalfCloseTimeout, true),
	}
	if t := f.TCP; t.FlowLifetime <= t.HeadTimeout {
		line := n.Line
		if l := m["flow_lifetime"]; l != nil {
			line = l.Line
		} else if l := m["head_timeout"]; l != nil {
			line = l.Line
		}
		d.errorf(line, "tcp.flow_lifetime", "%v must exceed head_timeout %v: a flow lives at least until its head is due", t.FlowLifetime, t.HeadTimeout)
	}
}

func (d *decoder) backends(f *File, n *yaml.Node) {
	m := d.section(n, "backends", backendKeys)
	f.Backends = Backends{
		ConcurrencyCap:    d.integer(m["concurrency_cap"], "backends.concurrency_cap", 0, 0, math.MaxInt),
		Expected:          d.integer(m["expected"], "backends.expected", 0, 0, math.MaxInt),
		KeepaliveInterval: d.duration(m["keepalive_interval"], "backends.keepalive_interval", DefaultKeepaliveInterval, true),
		SpliceRetry:       d.duration(m["splice_retry"], "backends.splice_retry", DefaultSpliceRetry, true),
		HandoffAhead:      d.integer(m["handoff_ahead"], "backends.handoff_ahead", DefaultHandoffAhead, 0, 64),
	}
}

func (d *decoder) scheduler(f *File, n *yaml.Node) {
	m := d.section(n, "scheduler", schedulerKeys)
	s := &f.Scheduler
	s.Cycle = d.duration(m["cycle"], "scheduler.cycle", DefaultCycle, true)
	s.TypicalServiceTime = d.duration(m["typical_service_time"], "scheduler.typical_service_time", DefaultTypicalService, true)
	s.NormalSize = SizeRange{Max: DefaultNormalSizeMax}
	if ns := m["normal_size"]; !absent(ns) {
		r := d.mapping(ns, "scheduler.normal_size", sizeRangeKeys)
		s.NormalSize.Min = d.size(r["min"], "scheduler.normal_size.min", 0, 0, math.MaxInt)
		s.NormalSize.Max = d.size(r["max"], "scheduler.normal_size.max", DefaultNormalSizeMax, 0, math.MaxInt)
		if s.NormalSize.Max < s.NormalSize.Min {
			d.errorf(ns.Line, "scheduler.normal_size", "max %s is below min %s",
				FormatSize(s.NormalSize.Max), FormatSize(s.NormalSize.Min))
		}
	}
	s.BalanceLimit = d.duration(m["balance_limit"], "scheduler.balance_limit", DefaultBalanceLimit, true)
	s.DebtLimit = d.duration(m["debt_limit"], "scheduler.debt_limit", DefaultDebtLimit, true)
	s.QueueTimeout = d.duration(m["queue_timeout"], "scheduler.queue_timeout", DefaultQueueTimeout, true)
	s.CapWindow = d.duration(m["cap_window"], "scheduler.cap_window", DefaultCapWindow, true)
	s.QueueCapacity = d.integer(m["queue_capacity"], "scheduler.queue_capacity", DefaultQueueCapacity, 1, math.MaxInt)
	s.RetryAfter = d.duration(m["retry_after"], "scheduler.retry_after", DefaultRetryAfter, false)
	if ra := m["retry_after"]; s.RetryAfter%1e9 != 0 {
		d.errorf(ra.Line, "scheduler.retry_after", "must be whole seconds (Retry-After counts seconds)")
		s.RetryAfter = DefaultRetryAfter
	}
	s.DefaultCustomer = DefaultCustomerName
	if dc := m["default_customer"]; !absent(dc) {
		s.DefaultCustomer = d.str(dc, "scheduler.default_customer", DefaultCustomerName)
		if msg := checkName(s.DefaultCustomer); msg != "" {
			d.errorf(dc.Line, "scheduler.default_customer", "%s", msg)
			s.DefaultCustomer = DefaultCustomerName
		}
	}
}

func (d *decoder) listeners(f *File, n *yaml.Node) {
	if n == nil {
		return
	}
	items := d.sequence(n, "listeners")
	if n.Kind == yaml.SequenceNode && len(items) == 0 {
		d.errorf(n.Line, "listeners", "at least one listener is required")
	}
	firstAt := make(map[Listener]int) // policy left zero: the key is VIP:port
	for i, it := range items {
		path := index("listeners", i)
		m := d.mapping(it, path, listenerKeys)
		if m == nil {
			continue
		}
		var l Listener
		if v := d.require(m, path, "vip", it.Line); v != nil {
			l.VIP = d.ipv4(v, path+".vip")
		}
		if p := d.require(m, path, "port", it.Line); p != nil {
			l.Port = uint16(d.integer(p, path+".port", 0, 1, math.MaxUint16))
		}
		if l.VIP.IsValid() && l.VIP == f.Handoff {
			d.errorf(m["vip"].Line, path+".vip", "%s is also the handoff address; the two must differ", l.VIP)
		}
		if l.VIP.IsValid() && l.Port != 0 {
			if j, dup := firstAt[l]; dup {
				d.errorf(it.Line, path, "%s:%d is already listed at listeners[%d]", l.VIP, l.Port, j)
			} else {
				firstAt[l] = i
			}
		}
		l.Policy = DefaultPolicy
		if p := m["policy"]; !absent(p) {
			switch s := d.str(p, path+".policy", ""); Policy(s) {
			case PolicyCredit, PolicyFIFO, PolicyLifoPri, PolicyEightFIFO, PolicySingleFIFO, PolicyFeedback:
				l.Policy = Policy(s)
			default:
				d.errorf(p.Line, path+".policy", "%q is not a policy (known: credit, fifo, lifo-pri, eight-fifo, single-fifo, feedback)", s)
			}
		}
		if qt := m["queue_timeout"]; !absent(qt) {
			l.QueueTimeout = d.duration(qt, path+".queue_timeout", 0, true)
			switch l.Policy {
			case PolicyCredit:
				d.errorf(qt.Line, path+".queue_timeout", "credit listeners share scheduler.queue_timeout; only fifo and class-based listeners have their own")
				l.QueueTimeout = 0
			case PolicyFeedback:
				d.errorf(qt.Line, path+".queue_timeout", "feedback listeners share feedback.queue_timeout; only fifo and class-based listeners have their own")
				l.QueueTimeout = 0
			}
		}
		f.Listeners = append(f.Listeners, l)
	}
}
