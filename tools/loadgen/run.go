package loadgen

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// streamState is one stream's client and counters during a run.
type streamState struct {
	cfg    Stream
	client *client
	sched  *schedule

	// Written by the scheduler goroutine only, read after the run.
	offered, sent, notSent int64

	mu         sync.Mutex // guards the measured-window results below
	classes    [numClasses]int64
	retryAfter [numClasses]int64
	errors     [numErrorKinds]int64
	bodyBytes  int64
	trees      []int64              // 2xx answers per X-Content-Tree, index 1..
	sessions   [2]SessionKindCounts // new, known (streams with sessions)
	latencyOK  Histogram            // 2xx answers
	latencyAll Histogram            // every sent request, answered or failed
	sendLag    Histogram            // got a connection - intended time

	// Every phase, for the progress line.
	liveSent, liveOK atomic.Int64
}

// record adds the outcome of a request of the measured window.
func (s *streamState) record(o outcome, intended time.Time) {
	latency := o.doneAt.Sub(intended)
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.err {
		s.errors[o.kind]++
	} else {
		s.classes[o.class]++
		if o.retryAfter {
			s.retryAfter[o.class]++
		}
		if o.class == class2xx && o.tree > 0 {
			for len(s.trees) <= o.tree {
				s.trees = append(s.trees, 0)
			}
			s.trees[o.tree]++
		}
		if o.class == class2xx {
			s.latencyOK.Record(latency)
		}
	}
	if o.session != noSession {
		s.sessions[o.session-newSession].add(o)
	}
	s.bodyBytes += o.bodyBytes
	s.latencyAll.Record(latency)
	if !o.connAt.IsZero() {
		s.sendLag.Record(o.connAt.Sub(intended))
	}
}

// runner holds one run's state.
type runner struct {
	cfg      Config
	streams  []*streamState
	start    time.Time
	inFlight atomic.Int64
	workers  sync.WaitGroup
}

// Run offers the configured load to cfg.Target and returns what came of
// it. Requests are released at their intended times whatever happened to
// earlier ones, and latency runs from the intended time to the last byte
// of the answer, so time a request spent waiting for the generator, for a
// pooled connection or behind a stalled server is counted, not omitted.
//
// Run writes a progress line to progress once a second (nil: none). When
// ctx ends early, Run stops releasing requests, lets those in flight
// finish (each within Timeout) so their results still count, and returns
// the partial result with Interrupted set and a nil error.
// Errors are for configurations that cannot run.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg}
	sources := newSourceRing(cfg.Sources) // shared: every stream spreads over all
	for i, st := range cfg.Streams {
		s := &streamState{
			cfg:    st,
			client: newClient(cfg.Target, st, cfg.ConnsPerStream, cfg.Timeout),
			sched:  newSchedule(st.Arrival, st.Rate, cfg.Seed, i),
		}
		s.sched.steps = cfg.Steps
		s.client.requests = streamRequests(s.client.request, st, cfg.SessionCookie)
		s.client.ring.rolling = newRollingSessions(s.client.request, st, cfg.SessionCookie)
		s.client.ring.sessions = st.Sessions > 0
		if len(cfg.Sources) > 0 {
			s.client.sources = sources
		}
		r.streams = append(r.streams, s)
	}
	defer func() {
		for _, s := range r.streams {
			s.client.close()
		}
	}()

	r.start = time.Now()
	stopProgress := startProgress(progress, r)
	stoppedAt, interrupted := r.release(ctx)
	r.workers.Wait()
	stopProgress()
	return r.result(stoppedAt, interrupted), nil
}

// release is the scheduler: it walks every stream's schedule in intended-
// time order, sleeping until the next request is due, and starts each
// request as it falls due. When it runs late it starts every overdue
// request at once; their latency still counts from their intended times.
// It returns the offset at which it stopped: the end of the run, or the
// moment ctx ended.
func (r *runner) release(ctx context.Context) (stoppedAt time.Duration, interrupted bool) {
	end := r.cfg.Warmup + r.cfg.Duration
	next := make([]time.Duration, len(r.streams))
	for i, s := range r.streams {
		next[i] = s.sched.next()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		first := 0
		for i := range next {
			if next[i] < next[first] {
				first = i
			}
		}
		if next[first] >= end {
			return end, false
		}
		if wait := time.Until(r.start.Add(next[first])); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return min(time.Since(r.start), end), true
			}
		} else if ctx.Err() != nil {
			return min(time.Since(r.start), end), true
		}
		now := time.Since(r.start)
		for i, s := range r.streams {
			for next[i] < end && next[i] <= now {
				r.startRequest(s, next[i])
				next[i] = s.sched.next()
			}
		}
	}
}

// startRequest sends one request in its own goroutine, or counts it as not
// sent when MaxInFlight requests are already outstanding.
func (r *runner) startRequest(s *streamState, offset time.Duration) {
	measured := offset >= r.cfg.Warmup
	if measured {
		s.offered++
	}
	if r.inFlight.Load() >= int64(r.cfg.MaxInFlight) {
		if measured {
			s.notSent++
		}
		return
	}
	r.inFlight.Add(1)
	s.liveSent.Add(1)
	if measured {
		s.sent++
	}
	intended := r.start.Add(offset)
	r.workers.Go(func() {
		o := s.client.do()
		r.inFlight.Add(-1)
		if !o.err && o.class == class2xx {
			s.liveOK.Add(1)
		}
		if measured {
			s.record(o, intended)
		}
	})
}
