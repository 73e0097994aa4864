package sched

import (
	"fmt"
	"sort"
	"strings"
)

// Kind says which group a request class belongs to in the LIFO-Pri
// policy: every waiting transaction request is served before any
// browsing request.
type Kind uint8

// The zero Kind is deliberately invalid, so a class whose Kind was
// forgotten in a configuration is reported instead of silently becoming
// a browsing class.
const (
	// Browsing requests look at the shop (front page, catalogue, search,
	// product details); each is worth little, and a client whose request
	// waited too long has usually gone.
	Browsing Kind = iota + 1
	// Transaction requests move a session towards a sale (login,
	// shipping, payment, confirmation); each is worth far more.
	Transaction
)

func (k Kind) String() string {
	switch k {
	case Browsing:
		return "browsing"
	case Transaction:
		return "transaction"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Class is one request class of the e-commerce workload: a name, which
// group it belongs to, what serving one of its requests is worth, how
// many of its requests may wait, and which URL paths belong to it.
type Class struct {
	Name string
	Kind Kind
	// Utility is the value of serving one request of the class. Within
	// a group, LifoPri serves the queue with the largest queue length x
	// Utility first.
	Utility float64
	// QueueCap is how many requests of the class may wait; 0 means the
	// default of its kind (DefaultBrowsingCap, DefaultTransactionCap).
	QueueCap int
	// Patterns select the request paths of the class (see Classifier):
	// "/login" matches that path exactly, "/browse*" every path that
	// starts with "/browse". The query string of a request ("?...") is
	// ignored; patterns cannot contain one.
	Patterns []string
}

// Default queue capacities of DefaultClasses, also used for a Class whose
// QueueCap is 0.
const (
	DefaultBrowsingCap    = 50
	DefaultTransactionCap = 25
)

// DefaultClasses returns the eight classes of the published LIFO-Pri
// experiment, browsing first, each time in a fresh slice:
//
//	class     kind         utility  capacity  patterns
//	main      browsing          27        50  "/" "/index.html" "/main*"
//	browse    browsing          22        50  "/browse*"
//	search    browsing          36        50  "/search*"
//	details   browsing          73        50  "/details*" "/product*"
//	login     transaction     3650        25  "/login*"
//	shipping  transaction     4050        25  "/shipping*"
//	payment   transaction     4500        25  "/payment*"
//	confirm   transaction     5000        25  "/confirm*"
//
// Paths that match none of them are usually classified as "main" (pass
// it as the Classifier's fallback): an unknown page is most likely an
// entry point.
func DefaultClasses() []Class {
	b := func(name string, utility float64, patterns ...string) Class {
		return Class{Name: name, Kind: Browsing, Utility: utility, QueueCap: DefaultBrowsingCap, Patterns: patterns}
	}
	t := func(name string, utility float64, patterns ...string) Class {
		return Class{Name: name, Kind: Transaction, Utility: utility, QueueCap: DefaultTransactionCap, Patterns: patterns}
	}
	return []Class{
		b("main", 27, "/", "/index.html", "/main*"),
		b("browse", 22, "/browse*"),
		b("search", 36, "/search*"),
		b("details", 73, "/details*", "/product*"),
		t("login", 3650, "/login*"),
		t("shipping", 4050, "/shipping*"),
		t("payment", 4500, "/payment*"),
		t("confirm", 5000, "/confirm*"),
	}
}

// checkClasses validates classes (names unique and non-empty, a known
// Kind, a finite positive Utility, a QueueCap >= 0) and returns a copy
// with zero QueueCaps replaced by the default of their kind. Patterns are
// left to NewClassifier. Errors name the class index and field.
func checkClasses(classes []Class) ([]Class, error) {
	out := make([]Class, len(classes))
	seen := make(map[string]int, len(classes))
	for i, c := range classes {
		field := func(name, problem string) error {
			return fmt.Errorf("sched: Classes[%d].%s: %s", i, name, problem)
		}
		switch {
		case c.Name == "":
			return nil, field("Name", "must not be empty")
		case c.Kind != Browsing && c.Kind != Transaction:
			return nil, field("Kind", "must be Browsing or Transaction")
		case !finite(c.Utility) || c.Utility <= 0:
			return nil, field("Utility", "must be a finite number > 0")
		case c.QueueCap < 0:
			return nil, field("QueueCap", "must not be negative")
		}
		if j, dup := seen[c.Name]; dup {
			return nil, field("Name", fmt.Sprintf("%q is also Classes[%d]", c.Name, j))
		}
		seen[c.Name] = i
		if c.QueueCap == 0 {
			c.QueueCap = DefaultBrowsingCap
			if c.Kind == Transaction {
				c.QueueCap = DefaultTransactionCap
			}
		}
		out[i] = c
	}
	return out, nil
}

// Classifier maps request paths to classes. An exact pattern beats any
// prefix pattern; among prefix patterns the longest wins; the query
// string of the path is ignored; paths no pattern matches go to the
// fallback class. It is read-only once built, so it may be shared.
type Classifier struct {
	exact    map[string]int
	prefixes []prefixPattern // longest first
	fallback int
}

type prefixPattern struct {
	prefix string
	class  int
}

// NewClassifier builds a Classifier for classes, whose indices Classify
// returns, sending unmatched paths to the class named fallback. Patterns
// must start with "/", may end with "*" (prefix) but contain no other
// "*" and no "?", and the same pattern may not appear twice. Errors name
// the class index and field, such as "sched: Classes[2].Patterns[0]:
// must start with \"/\"".
func NewClassifier(classes []Class, fallback string) (*Classifier, error) {
	if _, err := checkClasses(classes); err != nil {
		return nil, err
	}
	c := &Classifier{exact: make(map[string]int), fallback: -1}
	owner := make(map[string]string) // pattern -> "Classes[i].Patterns[j]"
	for i, class := range classes {
		if class.Name == fallback {
			c.fallback = i
		}
		for j, p := range class.Patterns {
			where := fmt.Sprintf("Classes[%d].Patterns[%d]", i, j)
			bad := func(problem string) error { return fmt.Errorf("sched: %s: %s", where, problem) }
			body, isPrefix := strings.CutSuffix(p, "*")
			switch {
			case !strings.HasPrefix(p, "/"):
				return nil, bad(fmt.Sprintf("%q must start with \"/\"", p))
			case strings.Contains(body, "*"):
				return nil, bad(fmt.Sprintf("%q: \"*\" is only allowed at the end", p))
			case strings.Contains(p, "?"):
				return nil, bad(fmt.Sprintf("%q: the query string is ignored, patterns cannot contain \"?\"", p))
			}
			if first, dup := owner[p]; dup {
				return nil, bad(fmt.Sprintf("%q is also %s", p, first))
			}
			owner[p] = where
			if isPrefix {
				c.prefixes = append(c.prefixes, prefixPattern{prefix: body, class: i})
			} else {
				c.exact[p] = i
			}
		}
	}
	if c.fallback < 0 {
		return nil, fmt.Errorf("sched: fallback class %q is not one of the classes", fallback)
	}
	// Longest prefix first, so "/browse/cart*" can take paths away from
	// "/browse*"; equal lengths keep configuration order.
	sort.SliceStable(c.prefixes, func(a, b int) bool {
		return len(c.prefixes[a].prefix) > len(c.prefixes[b].prefix)
	})
	return c, nil
}

// Classify returns the index of path's class among the classes the
// Classifier was built with. path is the request-target as sent
// ("/search?q=shoes"); everything from the first "?" on is ignored. It
// does not allocate.
func (c *Classifier) Classify(path string) int {
	if q := strings.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	if i, ok := c.exact[path]; ok {
		return i
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.class
		}
	}
	return c.fallback
}
