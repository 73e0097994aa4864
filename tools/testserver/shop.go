package testserver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// Shop makes the handler the back-end of the LIFO-Pri shop experiment
// (docs/architecture.md §6): the eight pages of package tools/session each
// answer 200 with a small HTML page after a service time drawn from an
// exponential distribution with the page's mean. The service time is a
// wait, not work, so the requests a back-end serves at once are bounded
// by the front-end's concurrency cap, as the simulator's slots are.
type Shop struct {
	// ServiceMean is each page's mean service time, indexed by
	// session.Stage. DefaultShopService gives the simulator's.
	ServiceMean [session.NumPages]time.Duration
	// ExpFloat64 returns an exponential variate of mean 1 for each
	// request; the service time is that times the page's mean. It is
	// called from concurrent handlers. Nil: math/rand/v2's ExpFloat64.
	// Tests set it to fix the draws.
	ExpFloat64 func() float64
}

// DefaultShopService returns the per-page mean service times, which the
// simulated experiment uses too (tools/experiment DefaultConfig):
// browsing pages 150-300 ms, transactions 400-600 ms, as they write to a
// database.
func DefaultShopService() [session.NumPages]time.Duration {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	return [session.NumPages]time.Duration{
		session.Main:     ms(150),
		session.Browse:   ms(200),
		session.Search:   ms(300),
		session.Details:  ms(200),
		session.Login:    ms(400),
		session.Shipping: ms(400),
		session.Payment:  ms(500),
		session.Confirm:  ms(600),
	}
}

// ParseShopService reads "main=150ms,browse=200ms,...": the pages given
// take the given mean, the others keep DefaultShopService's. An empty
// string is the defaults.
func ParseShopService(s string) ([session.NumPages]time.Duration, error) {
	means := DefaultShopService()
	if strings.TrimSpace(s) == "" {
		return means, nil
	}
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return means, fmt.Errorf("shop service %q: %q is not page=duration", s, pair)
		}
		page, ok := stageByName(name)
		if !ok {
			return means, fmt.Errorf("shop service %q: no page %q (pages: %s)", s, name, strings.Join(pageNames(), ", "))
		}
		if seen[name] {
			return means, fmt.Errorf("shop service %q: page %q given twice", s, name)
		}
		seen[name] = true
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return means, fmt.Errorf("shop service %q: %s=%q is not a non-negative duration", s, name, value)
		}
		means[page] = d
	}
	return means, nil
}

// FormatShopService writes means the way ParseShopService reads them,
// every page listed.
func FormatShopService(means [session.NumPages]time.Duration) string {
	parts := make([]string, session.NumPages)
	for p, d := range means {
		parts[p] = session.Stage(p).String() + "=" + d.String()
	}
	return strings.Join(parts, ",")
}

func stageByName(name string) (session.Stage, bool) {
	for p := range session.NumPages {
		if session.Stage(p).String() == name {
			return session.Stage(p), true
		}
	}
	return session.Exit, false
}

func pageNames() []string {
	names := make([]string, session.NumPages)
	for p := range session.NumPages {
		names[p] = session.Stage(p).String()
	}
	return names
}

// shopPages registers the eight pages on mux. The patterns match the
// path only, so any query string is ignored.
func (s *server) shopPages(mux *http.ServeMux) {
	for p := range session.NumPages {
		page := session.Stage(p)
		pattern := "GET " + page.Path()
		if page.Path() == "/" {
			pattern = "GET /{$}"
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.shopPage(w, r, page) })
	}
}

// shopPage waits the page's service time, then answers its page.
func (s *server) shopPage(w http.ResponseWriter, r *http.Request, page session.Stage) {
	exp := s.cfg.Shop.ExpFloat64
	if exp == nil {
		exp = rand.ExpFloat64
	}
	d := shopServiceTime(exp(), s.cfg.Shop.ServiceMean[page])
	w.Header().Set("X-Service-Time", d.String())
	if s.cfg.Wait(r.Context(), d) != nil {
		return // the client left; nobody reads an answer
	}
	body := shopBody(page, s.id)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write([]byte(body))
}

// shopServiceTime is x times mean, saturating rather than overflowing
// for an absurd draw.
func shopServiceTime(x float64, mean time.Duration) time.Duration {
	d := x * float64(mean)
	if !(d < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(max(d, 0))
}

// shopBody is the page's HTML: fixed for a (page, back-end) pair, a few
// hundred bytes, so one segment carries the whole answer.
func shopBody(page session.Stage, id string) string {
	return "<!doctype html>\n<html><head><title>qsplice shop: " + page.String() + "</title></head>\n" +
		"<body><h1>" + page.String() + "</h1><p>Page " + page.Path() + " of the qsplice test shop, served by back-end " +
		id + ".</p></body></html>\n"
}
