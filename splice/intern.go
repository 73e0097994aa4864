package splice

// Request heads repeat themselves: a handful of methods, the Host names
// the front-end serves, the popular paths. The daemon needs them as
// strings (a customer's domain is a map key, a request waits in a
// scheduler queue after its bytes are gone), and copying each one out of
// every head was most of what a connection per request allocated. An
// interner hands back the string it made the first time; a lookup with
// the bytes makes no copy (m[string(b)]).
//
// It is bounded: a head that is longer than internMaxLen is copied as
// before, and when internMax strings are held the table is emptied and
// fills again with what comes next, so random paths cost what they always
// did and never grow the table.

const (
	internMax    = 1024
	internMaxLen = 256
)

type interner struct {
	m map[string]string
}

// get returns b as a string: the one made before if b was seen since the
// table was last emptied, else a new one.
func (t *interner) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := t.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(s) <= internMaxLen {
		if t.m == nil {
			t.m = make(map[string]string)
		}
		if len(t.m) >= internMax {
			clear(t.m)
		}
		t.m[s] = s
	}
	return s
}
