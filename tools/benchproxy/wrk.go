package benchproxy

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkScript makes wrk print its exact totals on one line at the end;
// its human summary rounds them ("1.23GB"). Numbers go through %.0f:
// LuaJIT's %d is not safe beyond 2^31 and a bulk run reads more bytes.
// The latency percentiles are wrk's (microseconds, from a request's
// write to its response's end): a tail that no mean shows, such as
// connections that wait for a retransmission timeout, shows in p99.
const wrkScript = `done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("` + wrkTag + ` requests=%.0f bytes=%.0f duration_us=%.0f connect=%.0f read=%.0f write=%.0f status=%.0f timeout=%.0f p50_us=%.0f p99_us=%.0f\n",
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`

const wrkTag = "qsplice-bench-wrk"

// WrkSummary is what one wrk run did, from wrkScript's line.
type WrkSummary struct {
	Requests int64         `json:"requests"`
	Bytes    int64         `json:"bytes"` // response bytes read, headers included
	Duration time.Duration `json:"duration_ns"`
	// Errors by kind, as wrk counts them; Status is responses that were
	// not 2xx or 3xx.
	ErrConnect int64 `json:"err_connect"`
	ErrRead    int64 `json:"err_read"`
	ErrWrite   int64 `json:"err_write"`
	ErrStatus  int64 `json:"err_status"`
	ErrTimeout int64 `json:"err_timeout"`
	// Latency percentiles of the requests (zero in results written
	// before they were recorded).
	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns"`
}

// Errors is the sum of every kind of error.
func (w WrkSummary) Errors() int64 {
	return w.ErrConnect + w.ErrRead + w.ErrWrite + w.ErrStatus + w.ErrTimeout
}

// ParseWrk finds wrkScript's line in wrk's output and parses it.
func ParseWrk(out string) (WrkSummary, error) {
	var w WrkSummary
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), wrkTag+" ")
		if !ok {
			continue
		}
		fields := map[string]*int64{
			"requests": &w.Requests, "bytes": &w.Bytes,
			"connect": &w.ErrConnect, "read": &w.ErrRead, "write": &w.ErrWrite,
			"status": &w.ErrStatus, "timeout": &w.ErrTimeout,
		}
		var durationUS, p50US, p99US int64
		fields["duration_us"], fields["p50_us"], fields["p99_us"] = &durationUS, &p50US, &p99US
		seen := 0
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			dst := fields[k]
			if !ok || dst == nil {
				return w, fmt.Errorf("wrk summary: unexpected %q", kv)
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return w, fmt.Errorf("wrk summary: %s=%q is not a count", k, v)
			}
			*dst = n
			seen++
		}
		if seen != len(fields) {
			return w, fmt.Errorf("wrk summary: %d of %d fields in %q", seen, len(fields), line)
		}
		w.Duration = time.Duration(durationUS) * time.Microsecond
		w.LatencyP50, w.LatencyP99 = time.Duration(p50US)*time.Microsecond, time.Duration(p99US)*time.Microsecond
		if w.Duration <= 0 {
			return w, fmt.Errorf("wrk summary: zero duration in %q", line)
		}
		return w, nil
	}
	return w, fmt.Errorf("wrk printed no %q line; output:\n%s", wrkTag, out)
}

// wrkRun is one wrk invocation from a client namespace.
type wrkRun struct {
	ns       string
	url      string
	conns    int
	duration time.Duration
	close    bool   // one connection per request (Connection: close)
	script   string // path of wrkScript
}

func (r wrkRun) args() []string {
	threads := min(2, r.conns)
	secs := max(1, int(r.duration.Round(time.Second)/time.Second))
	args := []string{"wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(r.conns),
		"-d", strconv.Itoa(secs) + "s", "--timeout", "30s", "-s", r.script}
	if r.close {
		args = append(args, "-H", "Connection: close")
	}
	return append(args, r.url)
}

// start launches wrk; wait returns its summary.
func (r wrkRun) start(ctx context.Context) (wait func() (WrkSummary, error), err error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", r.ns}, r.args()...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("wrk: %w", err)
	}
	return func() (WrkSummary, error) {
		err := cmd.Wait()
		if err != nil {
			return WrkSummary{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(r.args()[1:], " "), err, out.String())
		}
		w, err := ParseWrk(out.String())
		if err != nil {
			return w, err
		}
		if w.Requests == 0 {
			return w, fmt.Errorf("wrk %s: no request completed\n%s", r.url, out.String())
		}
		return w, nil
	}, nil
}
