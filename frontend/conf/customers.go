package conf

import (
	"fmt"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (d *decoder) customers(f *File, n *yaml.Node) {
	if absent(n) {
		return
	}
	nameAt := make(map[string]int)      // customer name -> index
	domainOf := make(map[string]string) // normalised domain -> customer path
	for i, it := range d.sequence(n, "customers") {
		path := index("customers", i)
		m := d.mapping(it, path, customerKeys)
		if m == nil {
			continue
		}
		c := Customer{Weight: DefaultWeight}
		if nn := d.require(m, path, "name", it.Line); nn != nil {
			c.Name = d.uniqueName(nn, path+".name", "customers", nameAt, i)
		}
		d.scalars(m["domains"], path+".domains", func(s string, line int, dpath string) {
			dom, msg := normaliseDomain(s)
			if msg != "" {
				d.errorf(line, dpath, "%q %s", s, msg)
				return
			}
			if owner, dup := domainOf[dom]; dup {
				d.errorf(line, dpath, "%q is already listed at %s", dom, owner)
				return
			}
			domainOf[dom] = dpath
			c.Domains = append(c.Domains, dom)
		})
		c.Reservation = d.number(m["reservation"], path+".reservation", 0, false)
		c.Cap = d.number(m["cap"], path+".cap", 0, false)
		if c.Cap != 0 && c.Cap < c.Reservation {
			d.errorf(m["cap"].Line, path+".cap", "%g is below the reservation %g", c.Cap, c.Reservation)
		}
		c.Weight = d.number(m["weight"], path+".weight", DefaultWeight, true)
		c.QueueCapacity = d.integer(m["queue_capacity"], path+".queue_capacity", 0, 0, math.MaxInt)
		if c.QueueCapacity == 0 {
			c.QueueCapacity = f.Scheduler.QueueCapacity
		}
		f.Customers = append(f.Customers, c)
	}
}

// uniqueName decodes the name of list[i] (customers or classes),
// checking that it is usable and not taken; nameAt maps the names seen
// so far in that list to their index.
func (d *decoder) uniqueName(n *yaml.Node, path, list string, nameAt map[string]int, i int) string {
	name, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if msg := checkName(name); msg != "" {
		d.errorf(n.Line, path, "%s", msg)
		return name
	}
	if j, dup := nameAt[name]; dup {
		d.errorf(n.Line, path, "%q is already the name of %s[%d]", name, list, j)
		return name
	}
	nameAt[name] = i
	return name
}

// defaultCustomer adds the default customer when the file does not list
// it, so that the scheduler has a queue for every name Classify returns.
// Check warns about it, in case the name was a typing mistake.
func (d *decoder) defaultCustomer(f *File) {
	for _, c := range f.Customers {
		if c.Name == f.Scheduler.DefaultCustomer {
			return
		}
	}
	f.Customers = append(f.Customers, Customer{
		Name:          f.Scheduler.DefaultCustomer,
		Weight:        DefaultWeight,
		QueueCapacity: f.Scheduler.QueueCapacity,
		Implicit:      true,
	})
}

// checkName returns why s is not a usable customer name, or "". Names
// appear in metric labels and logs, hence the small alphabet.
func checkName(s string) string {
	if s == "" || len(s) > 64 {
		return "must be 1 to 64 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("%q may hold only letters, digits, '-', '_' and '.'", s)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// normaliseDomain lower-cases a configured domain and drops a trailing
// dot. It returns a reason when s is neither a host name nor "*." and a
// host name.
func normaliseDomain(s string) (string, string) {
	dom := strings.TrimSuffix(strings.ToLower(s), ".")
	host := dom
	if strings.HasPrefix(dom, "*.") {
		host = dom[2:]
	}
	switch {
	case strings.Contains(host, "*"):
		return "", `is not a domain: a wildcard must be the whole leftmost label, as in "*.example.com"`
	case strings.Contains(host, ":"):
		return "", "is not a domain: leave the port out (it is ignored when classifying)"
	case !isHostName(host):
		return "", "is not a domain name"
	}
	return dom, ""
}

// isHostName accepts lower-case LDH host names: labels of 1..63 letters,
// digits and inner hyphens, 253 characters in all.
func isHostName(s string) bool {
	if s == "" || len(s) > maxHostLen {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
