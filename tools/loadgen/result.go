package loadgen

import "time"

// Result is what a run came to, ready for encoding/json. Times are in
// seconds (_s) or milliseconds (_ms) as the names say.
type Result struct {
	Target         string    `json:"target"`
	Start          time.Time `json:"start"`
	WarmupS        float64   `json:"warmup_s"`
	DurationS      float64   `json:"duration_s"` // as configured
	MeasuredS      float64   `json:"measured_s"` // the window actually measured: shorter when interrupted
	TimeoutS       float64   `json:"timeout_s"`
	MaxInFlight    int       `json:"max_inflight"`
	ConnsPerStream int       `json:"conns_per_stream"`
	Seed           uint64    `json:"seed"`
	Interrupted    bool      `json:"interrupted"`
	// Steps is the step load the rates were multiplied by (Config.Steps).
	Steps []LoadStep `json:"steps,omitempty"`

	Streams []StreamResult `json:"streams"`
	Total   StreamResult   `json:"total"` // all streams merged; name "total"
}

// StreamResult covers the requests of one stream (or all of them) whose
// intended send time fell in the measured window. Once the run is over,
// Offered = Sent + NotSent and Sent = Completed + Errors: every request is
// accounted for exactly once.
type StreamResult struct {
	Name    string  `json:"name"`
	Host    string  `json:"host,omitempty"`
	Path    string  `json:"path,omitempty"`
	Arrival Arrival `json:"arrival,omitempty"`
	Rate    float64 `json:"rate"` // intended requests/s

	Offered    int64        `json:"offered"`  // intended
	Sent       int64        `json:"sent"`     // started
	NotSent    int64        `json:"not_sent"` // skipped: max in-flight reached
	Completed  StatusCounts `json:"completed"`
	RetryAfter RetryAfter   `json:"retry_after"`
	Errors     ErrorCounts  `json:"errors"`
	BodyBytes  int64        `json:"body_bytes"`

	// Trees counts the 2xx answers per content tree they named in
	// X-Content-Tree (index 1..M; index 0 unused); absent when none did.
	Trees []int64 `json:"trees,omitempty"`
	// NewSessions and KnownSessions split the requests of a stream with
	// sessions (Stream.Sessions): those that started a session and those
	// that continued one. Absent without sessions.
	NewSessions   *SessionKindCounts `json:"new_sessions,omitempty"`
	KnownSessions *SessionKindCounts `json:"known_sessions,omitempty"`

	// ThroughputOK is 2xx answers per second of the measured window.
	ThroughputOK float64 `json:"throughput_ok_per_s"`

	// Latency is intended send time to last byte, over 2xx answers.
	Latency LatencySummary `json:"latency"`
	// LatencyAll is the same over every sent request: any status, and
	// failures at the moment they failed (a timeout shows as about Timeout
	// plus any wait before the request started).
	LatencyAll LatencySummary `json:"latency_all"`
	// SendLag runs from the intended time to the moment the request had a
	// connection to go out on (after the connect when there is no pool),
	// over the requests that got one. Latency minus SendLag is what a
	// closed-loop tool would report; a large SendLag means the requests
	// queued in the generator or its connection pool, or the connect was
	// slow (a full accept queue, a lost SYN).
	SendLag LatencySummary `json:"send_lag"`
}

// StatusCounts counts answers by status class.
type StatusCounts struct {
	OK                 int64 `json:"2xx"`
	TooManyRequests    int64 `json:"429"`
	ServiceUnavailable int64 `json:"503"`
	Other              int64 `json:"other"`
}

// Total is the number of answered requests.
func (c StatusCounts) Total() int64 {
	return c.OK + c.TooManyRequests + c.ServiceUnavailable + c.Other
}

// RetryAfter counts the 429 and 503 answers that carried a Retry-After
// header, as a front-end shedding load politely should send.
type RetryAfter struct {
	TooManyRequests    int64 `json:"429"`
	ServiceUnavailable int64 `json:"503"`
}

// ErrorCounts counts sent requests that got no complete answer.
type ErrorCounts struct {
	Timeout        int64 `json:"timeout"`
	ConnectRefused int64 `json:"connect_refused"`
	Reset          int64 `json:"reset"` // reset, or closed before the answer ended
	Other          int64 `json:"other"`
}

// Total is the number of failed requests.
func (c ErrorCounts) Total() int64 { return c.Timeout + c.ConnectRefused + c.Reset + c.Other }

// LatencySummary condenses a histogram; all zero when Count is 0.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summary condenses h.
func (h *Histogram) Summary() LatencySummary {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return LatencySummary{
		Count:  h.Count(),
		MeanMs: ms(h.Mean()),
		P50Ms:  ms(h.Quantile(0.50)),
		P90Ms:  ms(h.Quantile(0.90)),
		P99Ms:  ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)),
		MaxMs:  ms(h.Max()),
	}
}

// tally is a stream's (or the total's) counters and histograms, gathered
// after the run so the total can merge them.
type tally struct {
	offered, sent, notSent int64
	classes, retryAfter    [numClasses]int64
	errors                 [numErrorKinds]int64
	bodyBytes              int64
	trees                  []int64
	sessions               [2]SessionKindCounts
	latencyOK, latencyAll  Histogram
	sendLag                Histogram
}

func (t *tally) add(s *streamState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.offered += s.offered
	t.sent += s.sent
	t.notSent += s.notSent
	for i := range t.classes {
		t.classes[i] += s.classes[i]
		t.retryAfter[i] += s.retryAfter[i]
	}
	for i := range t.errors {
		t.errors[i] += s.errors[i]
	}
	t.bodyBytes += s.bodyBytes
	for i := range t.sessions {
		t.sessions[i].merge(s.sessions[i])
	}
	for k, n := range s.trees {
		for len(t.trees) <= k {
			t.trees = append(t.trees, 0)
		}
		t.trees[k] += n
	}
	t.latencyOK.Merge(&s.latencyOK)
	t.latencyAll.Merge(&s.latencyAll)
	t.sendLag.Merge(&s.sendLag)
}

func (t *tally) result(window time.Duration) StreamResult {
	r := StreamResult{
		Offered: t.offered,
		Sent:    t.sent,
		NotSent: t.notSent,
		Completed: StatusCounts{
			OK:                 t.classes[class2xx],
			TooManyRequests:    t.classes[class429],
			ServiceUnavailable: t.classes[class503],
			Other:              t.classes[classOther],
		},
		RetryAfter: RetryAfter{
			TooManyRequests:    t.retryAfter[class429],
			ServiceUnavailable: t.retryAfter[class503],
		},
		Errors: ErrorCounts{
			Timeout:        t.errors[errTimeout],
			ConnectRefused: t.errors[errRefused],
			Reset:          t.errors[errReset],
			Other:          t.errors[errOther],
		},
		BodyBytes:  t.bodyBytes,
		Trees:      t.trees,
		Latency:    t.latencyOK.Summary(),
		LatencyAll: t.latencyAll.Summary(),
		SendLag:    t.sendLag.Summary(),
	}
	if window > 0 {
		r.ThroughputOK = float64(r.Completed.OK) / window.Seconds()
	}
	if n, k := t.sessions[0], t.sessions[1]; n.Sent+k.Sent > 0 {
		r.NewSessions, r.KnownSessions = &n, &k
	}
	return r
}

// SessionKindCounts is what came of the requests of one kind (new or known
// session): sent, answered 2xx, answered 503, timed out, failed
// otherwise (any other status or error).
type SessionKindCounts struct {
	Sent     int64 `json:"sent"`
	OK       int64 `json:"2xx"`
	Refused  int64 `json:"503"`
	TimedOut int64 `json:"timeout"`
	Failed   int64 `json:"other"`
}

func (c *SessionKindCounts) add(o outcome) {
	c.Sent++
	switch {
	case o.err && o.kind == errTimeout:
		c.TimedOut++
	case o.err:
		c.Failed++
	case o.class == class2xx:
		c.OK++
	case o.class == class503:
		c.Refused++
	default:
		c.Failed++
	}
}

func (c *SessionKindCounts) merge(d SessionKindCounts) {
	c.Sent += d.Sent
	c.OK += d.OK
	c.Refused += d.Refused
	c.TimedOut += d.TimedOut
	c.Failed += d.Failed
}

// result builds the run's Result once every request has finished.
func (r *runner) result(stoppedAt time.Duration, interrupted bool) *Result {
	window := max(stoppedAt-r.cfg.Warmup, 0)
	res := &Result{
		Target:         r.cfg.Target,
		Start:          r.start,
		WarmupS:        r.cfg.Warmup.Seconds(),
		DurationS:      r.cfg.Duration.Seconds(),
		MeasuredS:      window.Seconds(),
		TimeoutS:       r.cfg.Timeout.Seconds(),
		MaxInFlight:    r.cfg.MaxInFlight,
		ConnsPerStream: r.cfg.ConnsPerStream,
		Seed:           r.cfg.Seed,
		Interrupted:    interrupted,
		Steps:          r.cfg.Steps,
	}
	var total tally
	for _, s := range r.streams {
		var t tally
		t.add(s)
		total.add(s)
		sr := t.result(window)
		sr.Name, sr.Host, sr.Path, sr.Arrival, sr.Rate = s.cfg.Name, s.cfg.Host, s.cfg.Path, s.cfg.Arrival, s.cfg.Rate
		res.Streams = append(res.Streams, sr)
		res.Total.Rate += s.cfg.Rate
	}
	rate := res.Total.Rate
	res.Total = total.result(window)
	res.Total.Name, res.Total.Rate = "total", rate
	return res
}
