package experiment

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/session"
)

// metrics is one scrape of the front-end's /metrics: every sample by its
// series, the metric name with its labels exactly as written
// (`qsplice_customer_served_total{customer="main"}`).
type metrics map[string]float64

// parseMetrics reads the Prometheus text format the front-end writes:
// comment lines and samples "series value". Lines it cannot read are an
// error, so a format change shows rather than reading as zeros.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// class returns a per-customer series of the page class (LIFO-Pri
// listeners report their classes as customers).
func (m metrics) class(name string, page session.Stage, extra ...string) float64 {
	labels := fmt.Sprintf("customer=%q", page.String())
	for _, e := range extra {
		labels += "," + e
	}
	return m[name+"{"+labels+"}"]
}

// sumPrefix adds every series whose key starts with prefix.
func (m metrics) sumPrefix(prefix string) float64 {
	sum := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			sum += v
		}
	}
	return sum
}

// FrontendClass is what the front-end counted for one page class over
// a run (the difference of two scrapes of /metrics).
type FrontendClass struct {
	Offered   int64 `json:"offered"`    // requests that reached the policy
	Admitted  int64 `json:"admitted"`   // dispatched to a back-end
	Served    int64 `json:"served"`     // answered by a back-end in full
	QueueFull int64 `json:"queue_full"` // refused with 503
	Abandoned int64 `json:"abandoned"`  // gone when its turn came (client reset)
	// Waits counts dispatched requests, WaitSum their time in the queue
	// (seconds, real time), WaitedOver20ms those that waited longer.
	Waits          int64   `json:"waits"`
	WaitSum        float64 `json:"wait_s_sum"`
	WaitedOver20ms int64   `json:"waited_over_20ms"`
	// ResponseSum and Responses give the front-end's mean response
	// time (queue wait plus measured service) over served requests.
	ResponseSum float64 `json:"response_s_sum"`
	Responses   int64   `json:"responses"`
}

// frontendDelta is after minus before, per page class.
func frontendDelta(before, after metrics) [session.NumPages]FrontendClass {
	var out [session.NumPages]FrontendClass
	d := func(name string, page session.Stage, extra ...string) float64 {
		return after.class(name, page, extra...) - before.class(name, page, extra...)
	}
	for p := range session.NumPages {
		page := session.Stage(p)
		out[p] = FrontendClass{
			Offered:   int64(d("qsplice_customer_offered_total", page)),
			Admitted:  int64(d("qsplice_customer_admitted_total", page)),
			Served:    int64(d("qsplice_customer_served_total", page)),
			QueueFull: int64(d("qsplice_customer_rejected_total", page, `reason="queue-full"`)),
			Abandoned: int64(d("qsplice_customer_abandoned_total", page)),
			Waits:     int64(d("qsplice_customer_queue_wait_seconds_count", page)),
			WaitSum:   d("qsplice_customer_queue_wait_seconds_sum", page),
			WaitedOver20ms: int64(d("qsplice_customer_queue_wait_seconds_count", page) -
				d("qsplice_customer_queue_wait_seconds_bucket", page, `le="0.02"`)),
			ResponseSum: d("qsplice_customer_response_seconds_sum", page),
			Responses:   int64(d("qsplice_customer_response_seconds_count", page)),
		}
	}
	return out
}

// scrape fetches the front-end's /metrics from the lab's first client,
// trying again while its event loop is too busy to answer.
func scrape(ctx context.Context, c *http.Client) (metrics, error) {
	return retryBusy(ctx, func() (metrics, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", lab.AdminURL+"/metrics", nil)
		if err != nil {
			return nil, finalError{err}
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("front-end /metrics: %s", resp.Status)
		}
		m, err := parseMetrics(resp.Body)
		if err != nil {
			return m, finalError{err}
		}
		return m, nil
	})
}

// settle waits until the front-end has no request queued or in service
// (the clients are gone, but queued requests of clients that left leave
// the queue only when their turn comes), so that a scrape after it counts
// everything the run caused. It gives up after limit.
func settle(ctx context.Context, c *http.Client, limit time.Duration) (metrics, error) {
	return waitIdle(ctx, limit, func() (metrics, error) { return scrape(ctx, c) }, func(m metrics) int64 {
		return int64(m["qsplice_frontend_queue_length"] + m.sumPrefix("qsplice_backend_active{"))
	})
}
