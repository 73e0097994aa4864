package conf

import "strings"

// maxHostLen is the longest DNS name; longer Host headers match nothing.
const maxHostLen = 253

// index builds Classify's maps from the customers' domains.
func (f *File) index() {
	f.exact = make(map[string]string)
	f.wildcard = make(map[string]string)
	for _, c := range f.Customers {
		for _, dom := range c.Domains {
			if suffix, ok := strings.CutPrefix(dom, "*."); ok {
				f.wildcard[suffix] = c.Name
			} else {
				f.exact[dom] = c.Name
			}
		}
	}
}

// Classify names the customer a request belongs to, given its Host
// header: the customer listing the host exactly, else the one whose
// wildcard "*.parent" covers it (one label in front of parent), else the
// default customer. Case, a ":port" and a trailing dot are ignored. It
// does not allocate, so the front-end may call it for every request; it
// is safe for concurrent use.
func (f *File) Classify(host string) string {
	// Drop the port, unless the host is an IPv6 literal, which no
	// customer can list.
	if strings.HasPrefix(host, "[") {
		return f.Scheduler.DefaultCustomer
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		if !allDigits(host[i+1:]) {
			return f.Scheduler.DefaultCustomer
		}
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > maxHostLen {
		return f.Scheduler.DefaultCustomer
	}
	// Lower-case into a stack buffer; the map lookups below convert it
	// to a string without copying.
	var buf [maxHostLen]byte
	key := buf[:len(host)]
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		key[i] = c
	}
	if name, ok := f.exact[string(key)]; ok {
		return name
	}
	for i, c := range key {
		if c == '.' {
			if i > 0 {
				if name, ok := f.wildcard[string(key[i+1:])]; ok {
					return name
				}
			}
			break
		}
	}
	return f.Scheduler.DefaultCustomer
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
