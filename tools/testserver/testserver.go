// Package testserver is the lab's back-end web server: it serves
// deterministic bodies of any size after a configurable service time.
//
// Place in the data flow: it runs on each back-end host, behind the shim,
// and answers the requests the front-end splices to it. Its replies go
// through the shim straight to the client, which checks the body against
// package content (same back-end id and size, same bytes) and reads
// X-Backend-Id to learn who served it. The service time stands in for the
// work a real application does, and is what the scheduler's experiments
// (reservations, LIFO-Pri, content adaptation) vary.
//
// Routes:
//
//	GET  /data/<size>   content.Reader(id, size), e.g. /data/1M; the query
//	                    ?service=40ms sets this request's service time
//	GET  / and /health  "qsplice-testserver id=N", with no service time
//	POST /echo          the request body, back (for upload tests)
//
// With Config.Trees = M > 1 the site comes in M content trees (issue 10):
// GET /tree<k>/data/<size> for k < M answers content.NewTreeBody(id,
// size, k, M), content.TreeSize bytes after k/M of the service time;
// the plain paths are tree M; every answer carries X-Content-Tree: k.
//
// With Config.Shop set (qsplice-testserver -shop), the eight pages of the
// LIFO-Pri shop workload (/, /browse, /search, /details, /login,
// /shipping, /payment, /confirm; see Shop) answer a small HTML page after
// an exponential service time of the page's mean; / is then the shop's
// main page, and /health the only hello.
//
// HEAD works wherever GET does; a known path with another method gets 405,
// any other path 404. Every response carries X-Backend-Id.
package testserver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// Config sets up a handler. The zero value serves as back-end 0 with no
// service time.
type Config struct {
	ID uint32 // back-end id: seeds the bodies, sent as X-Backend-Id

	// ServiceTime is how long /data and /echo wait before answering, and
	// ServiceJitter spreads it uniformly over ServiceTime ± ServiceJitter
	// (never below zero). A ?service= query replaces both.
	ServiceTime, ServiceJitter time.Duration

	// Wait spends the service time; it returns early with an error when
	// ctx ends (the client went away). Nil waits on a timer. Tests set it
	// to record the times without waiting.
	Wait func(ctx context.Context, d time.Duration) error

	// Shop, when set, serves the shop experiment's pages (see Shop).
	Shop *Shop

	// Trees > 1 serves the site in that many content trees (see
	// contenttrees.go): /tree<k>/... for k < Trees, the plain paths as
	// tree Trees; every answer then says its tree in X-Content-Tree.
	Trees int
}

// NewHandler returns the test server's handler for cfg.
func NewHandler(cfg Config) http.Handler {
	s := &server{cfg: cfg, id: strconv.FormatUint(uint64(cfg.ID), 10)}
	if s.cfg.Wait == nil {
		s.cfg.Wait = waitTimer
	}
	mux := http.NewServeMux()
	if cfg.Shop != nil {
		s.shopPages(mux)
	} else {
		mux.HandleFunc("GET /{$}", s.hello)
	}
	mux.HandleFunc("GET /health", s.hello)
	mux.HandleFunc("GET /data/{size}", s.data)
	s.trees(mux) // trees.go
	mux.HandleFunc("POST /echo", s.echo)
	var h http.Handler = mux
	if cfg.Trees > 1 {
		h = s.withTrees(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend-Id", s.id)
		h.ServeHTTP(w, r)
	})
}

type server struct {
	cfg Config
	id  string
}

func (s *server) hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "qsplice-testserver id=%s\n", s.id)
}

func (s *server) data(w http.ResponseWriter, r *http.Request) {
	size, err := content.ParseSize(r.PathValue("size"))
	if err != nil {
		http.Error(w, "no such size: "+err.Error(), http.StatusNotFound)
		return
	}
	if !s.serviceWait(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream") // set, so ServeContent does not sniff
	// ServeContent sets Content-Length and handles HEAD and Range requests.
	http.ServeContent(w, r, "", time.Time{}, content.NewBody(s.cfg.ID, size))
}

func (s *server) echo(w http.ResponseWriter, r *http.Request) {
	if !s.serviceWait(w, r) {
		return
	}
	// Without full duplex, net/http stops reading the request body once
	// the response starts, and an echo of more than a buffer would fail.
	http.NewResponseController(w).EnableFullDuplex()
	if ct := r.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if r.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
	}
	io.Copy(w, r.Body) // an error means the client is gone; nothing to tell it
}

// serviceWait spends the request's service time and reports it in
// X-Service-Time. It returns false, having answered if still possible,
// when the request should not proceed.
func (s *server) serviceWait(w http.ResponseWriter, r *http.Request) bool {
	return s.serviceWaitScaled(w, r, 1, 1)
}

// serviceWaitScaled is serviceWait with the configured service time
// scaled by num/den (a cheaper content tree); a ?service= query is
// taken as it is.
func (s *server) serviceWaitScaled(w http.ResponseWriter, r *http.Request, num, den int64) bool {
	d := s.cfg.ServiceTime
	if j := s.cfg.ServiceJitter; j > 0 {
		d += time.Duration(rand.Int64N(2*int64(j)+1)) - j
	}
	d = d * time.Duration(num) / time.Duration(den)
	if q := r.URL.Query().Get("service"); q != "" {
		var err error
		if d, err = time.ParseDuration(q); err != nil || d < 0 {
			http.Error(w, "service must be a non-negative duration such as 40ms", http.StatusBadRequest)
			return false
		}
	}
	d = max(d, 0)
	w.Header().Set("X-Service-Time", d.String())
	return s.cfg.Wait(r.Context(), d) == nil
}

func waitTimer(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
