package loadgen

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Stream is one customer's request stream: every request carries Host and
// asks for Path, at Rate requests per second on average.
type Stream struct {
	Name    string  `json:"name"`           // label in results and progress
	Host    string  `json:"host,omitempty"` // Host header; empty: the target's host
	Path    string  `json:"path"`           // request path and query, e.g. /data/1K?service=40ms
	Rate    float64 `json:"rate"`           // intended requests per second
	Arrival Arrival `json:"arrival"`        // Poisson or Constant
	// Cookie, when set, is sent as the Cookie header of every request
	// ("tier=gold"), e.g. to match a feedback class's cookie rule.
	Cookie string `json:"cookie,omitempty"`
	// Sessions > 0 has the requests carry the session cookie
	// (Config.SessionCookie) of one of that many sessions in turn,
	// "<name>-<i>": the first request of each is a new session, the
	// later ones belong to a session the front-end has seen.
	Sessions int `json:"sessions,omitempty"`
	// SessionRequests > 0 ends each session after that many requests,
	// a new one taking its place (cookies.go: rollingSessions), so that
	// one request in SessionRequests starts a session; 0: sessions
	// never end.
	SessionRequests int `json:"session_requests,omitempty"`
}

// streamKeys are the keys ParseStream knows, in the order help shows them.
var streamKeys = []string{"name", "host", "rate", "path", "arrival", "cookie", "sessions", "session-requests"}

// maxRate bounds a stream's rate; far beyond what one process can send,
// it only catches typos such as a missing decimal point.
const maxRate = 1e6

// ParseStream reads a stream from its flag form, comma-separated key=value
// pairs: name (required), rate (required, requests/s), host, path (default
// "/"), arrival (poisson, the default, or constant). Only the first '='
// of a pair separates key from value, so a path may carry a query
// ("path=/data/1K?service=40ms"), but it may not contain a comma.
func ParseStream(s string) (Stream, error) {
	st := Stream{Path: "/", Arrival: Poisson}
	fail := func(format string, a ...any) (Stream, error) {
		return Stream{}, fmt.Errorf("stream %q: %s", s, fmt.Sprintf(format, a...))
	}
	pairs, err := splitPairs(s, streamKeys)
	if err != nil {
		return fail("%v", err)
	}
	for _, kv := range pairs {
		key, value := kv.key, kv.value
		switch key {
		case "name":
			st.Name = value
		case "host":
			st.Host = value
		case "path":
			st.Path = value
		case "arrival":
			st.Arrival = Arrival(value)
		case "cookie":
			st.Cookie = value
		case "sessions":
			n, err := strconv.Atoi(value)
			if err != nil {
				return fail("key \"sessions\": %q is not a whole number", value)
			}
			st.Sessions = n
		case "session-requests":
			n, err := strconv.Atoi(value)
			if err != nil {
				return fail("key \"session-requests\": %q is not a whole number", value)
			}
			st.SessionRequests = n
		case "rate":
			r, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return fail("key \"rate\": %q is not a number", value)
			}
			st.Rate = r
		}
	}
	if !pairs.has("rate") {
		return fail("key \"rate\" is missing")
	}
	if err := st.validate(); err != nil {
		return fail("%v", err)
	}
	return st, nil
}

// validate checks a stream however it was made, naming the bad key.
func (st Stream) validate() error {
	switch {
	case st.Name == "":
		return errors.New("key \"name\" is missing or empty")
	case strings.ContainsAny(st.Name, " \t\r\n"):
		return fmt.Errorf("key \"name\": %q contains white space", st.Name)
	case strings.ContainsAny(st.Host, " \t\r\n/"):
		return fmt.Errorf("key \"host\": %q is not a host[:port]", st.Host)
	case !strings.HasPrefix(st.Path, "/") || strings.ContainsAny(st.Path, " \t\r\n#"):
		return fmt.Errorf("key \"path\": %q must start with / and contain no spaces or fragment", st.Path)
	case math.IsNaN(st.Rate) || st.Rate <= 0 || st.Rate > maxRate:
		return fmt.Errorf("key \"rate\": %v must be in (0, %g] requests/s", st.Rate, float64(maxRate))
	case strings.ContainsAny(st.Cookie, "\r\n,"):
		return fmt.Errorf("key \"cookie\": %q must be one line without commas (join cookies with ;)", st.Cookie)
	case st.Sessions < 0 || st.Sessions > maxSessionsPerStream:
		return fmt.Errorf("key \"sessions\": %d is out of range 0..%d", st.Sessions, maxSessionsPerStream)
	case st.SessionRequests < 0 || st.SessionRequests > 0 && st.Sessions == 0:
		return fmt.Errorf("key \"session-requests\": %d needs sessions=N and must not be negative", st.SessionRequests)
	}
	if err := st.Arrival.valid(); err != nil {
		return fmt.Errorf("key \"arrival\": %v", err)
	}
	return nil
}

// keyValue is one key=value pair of a flag value.
type keyValue struct{ key, value string }

type keyValues []keyValue

func (kvs keyValues) has(key string) bool {
	for _, kv := range kvs {
		if kv.key == key {
			return true
		}
	}
	return false
}

// splitPairs reads a flag value of comma-separated key=value pairs, in
// order, refusing a pair without '=', a key given twice and a key not in
// keys. Only the first '=' of a pair separates key from value.
func splitPairs(s string, keys []string) (keyValues, error) {
	var pairs keyValues
	for _, pair := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not key=value (keys: %s)", pair, strings.Join(keys, ", "))
		case pairs.has(key):
			return nil, fmt.Errorf("key %q given twice", key)
		case !slices.Contains(keys, key):
			return nil, fmt.Errorf("unknown key %q (keys: %s)", key, strings.Join(keys, ", "))
		}
		pairs = append(pairs, keyValue{key, value})
	}
	return pairs, nil
}
