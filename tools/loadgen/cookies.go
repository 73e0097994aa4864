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

// streamRequests returns the requests a stream's client sends in turn,
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

// requestRing hands out a stream's requests in turn.
type requestRing struct {
	n atomic.Uint64
}

func (r *requestRing) pick(reqs [][]byte, base []byte) []byte {
	if len(reqs) == 0 {
		return base
	}
	return reqs[(r.n.Add(1)-1)%uint64(len(reqs))]
}
