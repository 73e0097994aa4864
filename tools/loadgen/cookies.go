package loadgen

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
)

// maxSessionsPerStream bounds Stream.Sessions: each session's request is
// built in advance.
const maxSessionsPerStream = 100_000

// validCookieName: a token of RFC 6265 (letters, digits, - _ .).
func validCookieName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.", r)) {
			return false
		}
	}
	return true
}

// streamRequests returns (for sessions that never end, see
// rollingSessions for those that do) the requests a stream's client sends in turn,
// built from base (the request without cookies, ending in the blank
// line): nil when the stream sends no cookie (base is used as it is),
// one request with the stream's Cookie, or one per session carrying
// "<cookie>=<name>-<i>" after the stream's Cookie.
func streamRequests(base []byte, st Stream, sessionCookie string) [][]byte {
	if st.Cookie == "" && st.Sessions == 0 {
		return nil
	}
	head := base[:len(base)-2] // up to the blank line's CRLF
	with := func(value string) []byte {
		var b bytes.Buffer
		b.Write(head)
		b.WriteString("Cookie: " + value + "\r\n\r\n")
		return b.Bytes()
	}
	if st.Sessions == 0 {
		return [][]byte{with(st.Cookie)}
	}
	reqs := make([][]byte, st.Sessions)
	for i := range reqs {
		v := sessionCookie + "=" + st.Name + "-" + strconv.Itoa(i)
		if st.Cookie != "" {
			v = st.Cookie + "; " + v
		}
		reqs[i] = with(v)
	}
	return reqs
}

// sessionKind says whether a request starts a session or continues one.
type sessionKind uint8

const (
	noSession    sessionKind = iota // the stream has no sessions
	newSession                      // the first request of its session
	knownSession                    // a later request of a session
)

// requestRing hands out a stream's requests in turn.
type requestRing struct {
	n atomic.Uint64
	// sessions: the requests are Stream.Sessions sessions' (the first
	// len(reqs) start them); rolling, when set, builds each request
	// instead (sessions that end).
	sessions bool
	rolling  *rollingSessions
}

// pick returns the next request and whether it starts its session.
func (r *requestRing) pick(reqs [][]byte, base []byte) ([]byte, sessionKind) {
	if r.rolling != nil {
		n := r.n.Add(1) - 1
		kind := knownSession
		if n/r.rolling.slots%r.rolling.length == 0 {
			kind = newSession
		}
		return r.rolling.request(n), kind
	}
	if len(reqs) == 0 {
		return base, noSession
	}
	n := r.n.Add(1) - 1
	switch {
	case !r.sessions:
		return reqs[n%uint64(len(reqs))], noSession
	case n < uint64(len(reqs)):
		return reqs[n], newSession
	}
	return reqs[n%uint64(len(reqs))], knownSession
}

// rollingSessions are Stream.Sessions sessions of Stream.SessionRequests
// requests each: request n goes to slot n mod Sessions, and a slot's
// session is replaced by a new one after SessionRequests requests, so
// one request in SessionRequests starts a new session and the others
// belong to sessions the front-end has seen.
type rollingSessions struct {
	head   []byte // the request up to the blank line, without cookies
	prefix string // "Cookie: [<cookie>; ]<name>=<stream>-"
	slots  uint64
	length uint64
}

func newRollingSessions(base []byte, st Stream, sessionCookie string) *rollingSessions {
	if st.Sessions == 0 || st.SessionRequests == 0 {
		return nil
	}
	prefix := "Cookie: "
	if st.Cookie != "" {
		prefix += st.Cookie + "; "
	}
	return &rollingSessions{head: base[:len(base)-2], prefix: prefix + sessionCookie + "=" + st.Name + "-",
		slots: uint64(st.Sessions), length: uint64(st.SessionRequests)}
}

// request is the n-th request: session "<stream>-<slot>.<generation>".
func (r *rollingSessions) request(n uint64) []byte {
	slot, gen := n%r.slots, n/r.slots/r.length
	b := make([]byte, 0, len(r.head)+len(r.prefix)+32)
	b = append(b, r.head...)
	b = append(b, r.prefix...)
	b = strconv.AppendUint(b, slot, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, gen, 10)
	return append(b, "\r\n\r\n"...)
}

// SessionID is the session the n-th request of a stream with rolling
// sessions carries (for tests and for reading a capture).
func SessionID(st Stream, n uint64) string {
	slot, gen := n%uint64(st.Sessions), n/uint64(st.Sessions)/uint64(st.SessionRequests)
	return st.Name + "-" + strconv.FormatUint(slot, 10) + "." + strconv.FormatUint(gen, 10)
}
