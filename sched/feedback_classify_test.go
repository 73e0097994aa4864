package sched

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCookieValue(t *testing.T) {
	for _, c := range []struct {
		header, name, want string
		ok                 bool
	}{
		{"sid=abc", "sid", "abc", true},
		{"a=1; sid=abc; b=2", "sid", "abc", true},
		{"a=1;sid=x", "sid", "x", true},
		{"xsid=1; sid=2", "sid", "2", true},
		{"sid=", "sid", "", true},
		{`sid="q"`, "sid", `"q"`, true},
		{"a=1; b=2", "sid", "", false},
		{"sid", "sid", "", false},
		{"", "sid", "", false},
	} {
		got, ok := CookieValue(c.header, c.name)
		if got != c.want || ok != c.ok {
			t.Errorf("CookieValue(%q, %q) = %q %v, want %q %v", c.header, c.name, got, ok, c.want, c.ok)
		}
	}
}

func feedbackClassesForTest() []FeedbackClass {
	return []FeedbackClass{
		{Name: "gold", Weight: 3, Hosts: []string{"gold.example", "*.vip.example"}, Cookies: []string{"tier=gold"}},
		{Name: "silver", Weight: 2, Paths: []string{"/api*"}, Subnets: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")}},
		{Name: "bronze", Weight: 1},
	}
}

// Classes match by Host, path, client subnet and cookie, the first class
// listed winning; others fall to the last class.
func TestFeedbackClassifierRules(t *testing.T) {
	c, err := NewFeedbackClassifier(FeedbackClassifierConfig{Classes: feedbackClassesForTest()})
	if err != nil {
		t.Fatal(err)
	}
	other := netip.MustParseAddr("198.18.0.5")
	for _, tc := range []struct {
		host, path, cookie string
		client             netip.Addr
		want               string
	}{
		{"Gold.Example:80", "/", "", other, "gold"},
		{"a.vip.example.", "/", "", other, "gold"},
		{"a.b.vip.example", "/", "", other, "bronze"}, // one label only
		{"shop.example", "/api/v1?x", "", other, "silver"},
		{"shop.example", "/", "", netip.MustParseAddr("198.18.1.9"), "silver"},
		{"shop.example", "/", "", netip.MustParseAddr("::ffff:198.18.1.9"), "silver"},
		{"shop.example", "/", "a=1; tier=gold", other, "gold"},
		{"shop.example", "/api", "tier=gold", other, "gold"}, // gold listed first
		{"shop.example", "/", "tier=golden", other, "bronze"},
		{"[::1]:80", "/", "", netip.Addr{}, "bronze"},
	} {
		r := Request{Host: tc.host, Path: tc.path, Client: tc.client}
		c.Classify(&r, tc.cookie, 0)
		if r.Customer != tc.want {
			t.Errorf("%q %q %q %v: class %q, want %q", tc.host, tc.path, tc.cookie, tc.client, r.Customer, tc.want)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() {
		r := Request{Host: "a.vip.example", Path: "/x"}
		c.Classify(&r, "tier=silver", 0)
	}); allocs != 0 {
		t.Errorf("Classify allocates %v times", allocs)
	}
}

// A session is known from its second request on; it reaches its
// transactional stage with a request to a transactional path and stays
// there; a table full of live sessions leaves new ones unknown; idle
// sessions make room.
func TestFeedbackClassifierSessions(t *testing.T) {
	c, err := NewFeedbackClassifier(FeedbackClassifierConfig{
		SessionCookie: "sid", TransactionalPaths: []string{"/cart*", "/checkout"},
		MaxSessions: 2, SessionIdle: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	step := func(path, cookie string, now int64) Request {
		r := Request{Path: path}
		c.Classify(&r, cookie, now)
		return r
	}
	if r := step("/", "sid=s1", 0); r.Session || r.Transactional {
		t.Errorf("first request of a session: %+v", r)
	}
	if r := step("/", "sid=s1", 1); !r.Session || r.Transactional {
		t.Errorf("second request: %+v", r)
	}
	if r := step("/cart/add", "x=1; sid=s1", 2); !r.Session || !r.Transactional {
		t.Errorf("cart request: %+v", r)
	}
	if r := step("/", "sid=s1", 3); !r.Transactional {
		t.Errorf("after the cart the session stays transactional: %+v", r)
	}
	if r := step("/checkout", "", 3); r.Session || r.Transactional {
		t.Errorf("no cookie: %+v", r)
	}
	step("/", "sid=s2", 4)
	step("/", "sid=s3", 5) // the table holds 2: s3 is not remembered
	if r := step("/", "sid=s3", 6); r.Session {
		t.Error("a session beyond MaxSessions was remembered")
	}
	later := int64(2 * time.Minute)
	step("/", "sid=s2", later) // s2 is live, s1 idle since 3
	step("/", "sid=s4", later+1)
	if r := step("/", "sid=s4", later+2); !r.Session || c.Sessions() != 2 {
		t.Errorf("after the sweep: s4 %+v, %d sessions", r, c.Sessions())
	}
	if r := step("/", "sid=s1", later+3); r.Session {
		t.Error("an idle session was not forgotten")
	}
}

func TestFeedbackClassifierErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  FeedbackClassifierConfig
		want string
	}{
		{FeedbackClassifierConfig{Classes: []FeedbackClass{}}, "Classes"},
		{FeedbackClassifierConfig{Fallback: "nowhere"}, "fallback"},
		{FeedbackClassifierConfig{SessionCookie: "a=b"}, "SessionCookie"},
		{FeedbackClassifierConfig{TransactionalPaths: []string{"cart"}}, "TransactionalPaths[0]"},
		{FeedbackClassifierConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1, Hosts: []string{"*."}}}}, "Classes[0].Hosts[0]"},
		{FeedbackClassifierConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1, Paths: []string{"/a*b"}}}}, "Classes[0].Paths[0]"},
		{FeedbackClassifierConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1, Cookies: []string{"novalue"}}}}, "Classes[0].Cookies[0]"},
		{FeedbackClassifierConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1, Subnets: []netip.Prefix{{}}}}}, "Classes[0].Subnets[0]"},
	} {
		_, err := NewFeedbackClassifier(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// FuzzCookieValue: CookieValue never panics, and a value it finds is
// really in the header right after "name=".
func FuzzCookieValue(f *testing.F) {
	f.Add("a=1; sid=abc", "sid")
	f.Add(";;; =; sid", "sid")
	f.Add("sid=\t x ;", "sid")
	f.Fuzz(func(t *testing.T, header, name string) {
		v, ok := CookieValue(header, name)
		if ok && !strings.Contains(header, name) {
			t.Fatalf("found %q for %q not in %q", v, name, header)
		}
		if ok && !strings.Contains(header, v) {
			t.Fatalf("value %q not in %q", v, header)
		}
		if strings.Contains(v, ";") {
			t.Fatalf("value %q spans a separator", v)
		}
	})
}
