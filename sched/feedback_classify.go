package sched

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"
)

// FeedbackClassifier sorts requests into the Feedback policy's classes
// and recognises sessions. A request belongs to the first class, in
// configuration order, with a rule it meets (FeedbackClass: Hosts,
// Paths, Subnets, Cookies), and to the fallback class when none does.
//
// Sessions are named by the value of one cookie (SessionCookie). A
// request whose session cookie the classifier has seen before belongs to
// a known session; the first request carrying a value starts the session
// (it is new: nothing distinguishes it from a client that made the value
// up). A known session reaches its transactional stage with its first
// request whose path matches TransactionalPaths, and stays there; its
// requests are then Transactional. The table of sessions is bounded
// (MaxSessions); sessions idle for SessionIdle are forgotten when room
// is needed.
//
// Unlike Classifier it keeps state (the sessions), so the caller
// serialises calls; time comes in as ns on the caller's clock.
type FeedbackClassifier struct {
	rules    []fbRule
	names    []string
	fallback int
	cookie   string
	txn      pathSet
	sessions map[string]sessionEntry
	max      int
	idle     int64
	swept    int64
}

// FeedbackClassifierConfig configures a FeedbackClassifier.
type FeedbackClassifierConfig struct {
	Classes []FeedbackClass // nil: DefaultFeedbackClasses()
	// Fallback names the class of requests no rule matches; "" means the
	// last class (the lowest priority).
	Fallback string
	// SessionCookie is the name of the cookie that carries the session;
	// "" turns session awareness off.
	SessionCookie string
	// TransactionalPaths are path patterns ("/cart", "/checkout*") that
	// put a session into its transactional stage.
	TransactionalPaths []string
	// MaxSessions bounds the sessions remembered (DefaultMaxSessions);
	// SessionIdle is how long an idle session is remembered
	// (DefaultSessionIdle).
	MaxSessions int
	SessionIdle time.Duration
}

// Defaults of FeedbackClassifierConfig.
const (
	DefaultMaxSessions = 100_000
	DefaultSessionIdle = 30 * time.Minute
)

type sessionEntry struct {
	last int64
	txn  bool
}

type fbRule struct {
	exactHosts map[string]bool
	wildHosts  map[string]bool // "example" for "*.example"
	paths      pathSet
	subnets    []netip.Prefix
	cookies    [][2]string // name, value
}

// pathSet matches request paths against "/exact" and "/prefix*"
// patterns, the query string ignored.
type pathSet struct {
	exact    map[string]bool
	prefixes []string
}

func newPathSet(patterns []string, where string) (pathSet, error) {
	s := pathSet{exact: map[string]bool{}}
	for j, p := range patterns {
		body, isPrefix := strings.CutSuffix(p, "*")
		bad := func(problem string) error { return fmt.Errorf("sched: %s[%d]: %q %s", where, j, p, problem) }
		switch {
		case !strings.HasPrefix(p, "/"):
			return s, bad("must start with \"/\"")
		case strings.Contains(body, "*"):
			return s, bad("\"*\" is only allowed at the end")
		case strings.Contains(p, "?"):
			return s, bad("the query string is ignored, patterns cannot contain \"?\"")
		}
		if isPrefix {
			s.prefixes = append(s.prefixes, body)
		} else {
			s.exact[p] = true
		}
	}
	sort.SliceStable(s.prefixes, func(a, b int) bool { return len(s.prefixes[a]) > len(s.prefixes[b]) })
	return s, nil
}

func (s *pathSet) match(path string) bool {
	if q := strings.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	if s.exact[path] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// NewFeedbackClassifier checks cfg and builds a classifier. Errors name
// the class index and field.
func NewFeedbackClassifier(cfg FeedbackClassifierConfig) (*FeedbackClassifier, error) {
	classes := cfg.Classes
	if classes == nil {
		classes = DefaultFeedbackClasses()
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("sched: Classes: need at least one class")
	}
	c := &FeedbackClassifier{
		cookie: cfg.SessionCookie, sessions: map[string]sessionEntry{},
		max: cfg.MaxSessions, idle: int64(cfg.SessionIdle), fallback: len(classes) - 1,
	}
	if c.max <= 0 {
		c.max = DefaultMaxSessions
	}
	if c.idle <= 0 {
		c.idle = int64(DefaultSessionIdle)
	}
	if strings.ContainsAny(c.cookie, "=; \t") {
		return nil, fmt.Errorf("sched: SessionCookie: %q is not a cookie name", c.cookie)
	}
	var err error
	if c.txn, err = newPathSet(cfg.TransactionalPaths, "TransactionalPaths"); err != nil {
		return nil, err
	}
	found := cfg.Fallback == ""
	for i, class := range classes {
		where := fmt.Sprintf("Classes[%d]", i)
		if class.Name == "" {
			return nil, fmt.Errorf("sched: %s.Name: must not be empty", where)
		}
		if class.Name == cfg.Fallback {
			c.fallback, found = i, true
		}
		r := fbRule{exactHosts: map[string]bool{}, wildHosts: map[string]bool{}, subnets: class.Subnets}
		for j, h := range class.Hosts {
			h = strings.ToLower(strings.TrimSuffix(h, "."))
			suffix, wild := strings.CutPrefix(h, "*.")
			if suffix == "" || strings.ContainsAny(suffix, "*:/ ") {
				return nil, fmt.Errorf("sched: %s.Hosts[%d]: %q is not a host name or \"*.parent\"", where, j, class.Hosts[j])
			}
			if wild {
				r.wildHosts[suffix] = true
			} else {
				r.exactHosts[h] = true
			}
		}
		if r.paths, err = newPathSet(class.Paths, where+".Paths"); err != nil {
			return nil, err
		}
		for j, p := range class.Subnets {
			if !p.IsValid() {
				return nil, fmt.Errorf("sched: %s.Subnets[%d]: not a valid prefix", where, j)
			}
		}
		for j, ck := range class.Cookies {
			name, value, ok := strings.Cut(ck, "=")
			if !ok || name == "" || strings.ContainsAny(name, "; \t") || strings.ContainsAny(value, "; \t") {
				return nil, fmt.Errorf("sched: %s.Cookies[%d]: %q is not \"name=value\"", where, j, ck)
			}
			r.cookies = append(r.cookies, [2]string{name, value})
		}
		c.rules = append(c.rules, r)
		c.names = append(c.names, class.Name)
	}
	if !found {
		return nil, fmt.Errorf("sched: fallback class %q is not one of the classes", cfg.Fallback)
	}
	return c, nil
}

// Classify fills r.Customer (the class name), r.Session and
// r.Transactional from r's Host, Path and Client and the raw Cookie
// header, and records the session at now.
func (c *FeedbackClassifier) Classify(r *Request, cookieHeader string, now int64) {
	r.Customer = c.names[c.class(r.Host, r.Path, cookieHeader, r.Client)]
	r.Session, r.Transactional = false, false
	if c.cookie == "" {
		return
	}
	sid, ok := CookieValue(cookieHeader, c.cookie)
	if !ok || sid == "" {
		return
	}
	txnPath := c.txn.match(r.Path)
	if e, known := c.sessions[sid]; known {
		e.last = now
		e.txn = e.txn || txnPath
		c.sessions[sid] = e
		r.Session, r.Transactional = true, e.txn
		return
	}
	if len(c.sessions) >= c.max {
		c.sweep(now)
		if len(c.sessions) >= c.max {
			return // full of live sessions: this one stays unknown
		}
	}
	c.sessions[strings.Clone(sid)] = sessionEntry{last: now, txn: txnPath}
}

// sweep forgets sessions idle longer than SessionIdle, at most once a
// second so that a table full of live sessions does not cost a scan per
// request.
func (c *FeedbackClassifier) sweep(now int64) {
	if now-c.swept < int64(time.Second) && c.swept != 0 {
		return
	}
	c.swept = now
	for k, e := range c.sessions {
		if now-e.last > c.idle {
			delete(c.sessions, k)
		}
	}
}

// Sessions is the number of sessions remembered.
func (c *FeedbackClassifier) Sessions() int { return len(c.sessions) }

// class returns the index of the first class with a rule the request
// meets, else the fallback's.
func (c *FeedbackClassifier) class(host, path, cookieHeader string, client netip.Addr) int {
	var buf [maxHostLen]byte
	h := hostKey(host, buf[:0])
	client = client.Unmap()
	for i := range c.rules {
		r := &c.rules[i]
		if h != nil && (r.exactHosts[string(h)] || wildMatch(r.wildHosts, h)) {
			return i
		}
		if r.paths.match(path) {
			return i
		}
		for _, p := range r.subnets {
			if client.IsValid() && p.Contains(client) {
				return i
			}
		}
		for _, ck := range r.cookies {
			if v, ok := CookieValue(cookieHeader, ck[0]); ok && v == ck[1] {
				return i
			}
		}
	}
	return c.fallback
}

// maxHostLen is the longest DNS name; longer Host headers match nothing.
const maxHostLen = 253

// hostKey lower-cases host into buf without its ":port" and trailing
// dot; nil when no host rule can match it (empty, too long, IPv6).
func hostKey(host string, buf []byte) []byte {
	if strings.HasPrefix(host, "[") {
		return nil
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > maxHostLen {
		return nil
	}
	for i := 0; i < len(host); i++ {
		b := host[i]
		if b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf = append(buf, b)
	}
	return buf
}

// wildMatch: "*.parent" covers exactly one label in front of parent.
func wildMatch(wild map[string]bool, h []byte) bool {
	if len(wild) == 0 {
		return false
	}
	for i, b := range h {
		if b == '.' {
			return i > 0 && wild[string(h[i+1:])]
		}
	}
	return false
}

// CookieValue finds the value of the cookie called name in a Cookie
// header ("a=1; sid=abc"); ok is false when it is not there. Values in
// double quotes keep their quotes. It does not allocate.
func CookieValue(header, name string) (value string, ok bool) {
	for header != "" {
		var pair string
		pair, header, _ = strings.Cut(header, ";")
		pair = strings.TrimLeft(pair, " \t")
		k, v, found := strings.Cut(pair, "=")
		if found && strings.TrimRight(k, " \t") == name {
			return strings.TrimRight(v, " \t"), true
		}
	}
	return "", false
}
