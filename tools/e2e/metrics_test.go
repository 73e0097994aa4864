package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/qsplice/qsplice/internal/exposition/expositiontest"
	"github.com/qsplice/qsplice/tools/lab"
)

// TestLabMetricsPassPromtool scrapes /metrics of the lab's front-end
// and of every shim, as a Prometheus server on the clients' LAN would,
// around one request through the VIP: each page parses with the
// Prometheus text parser, counts the request, and `promtool check
// metrics` finds nothing in it (issue 12).
func TestLabMetricsPassPromtool(t *testing.T) {
	l := needLab(t)
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	feURL := lab.AdminURL + "/metrics"
	before, _ := expositiontest.Scrape(t, c, feURL)
	if f := curlGet(t, l, "c1", vipURL(80, 1<<10)); f.status != 200 {
		t.Fatalf("request through the VIP: status %d", f.status)
	}
	after, page := expositiontest.Scrape(t, c, feURL)
	done := func(f expositiontest.Families) float64 {
		return f.Counter(t, "qsplice_frontend_handoffs_total", "outcome", "done")
	}
	if d := done(after) - done(before); d < 1 {
		t.Errorf("%g handoffs done across the request, want at least 1", d)
	}
	t.Run("promtool/frontend", func(t *testing.T) { expositiontest.Promtool(t, page) })
	for k := 1; k <= backends; k++ {
		url := fmt.Sprintf("http://%s:%d/metrics", l.BackendAddr(k), lab.BackendAdminPort)
		f, page := expositiontest.Scrape(t, c, url)
		if got := f.Gauge(t, "qsplice_shim_registered"); got != 1 {
			t.Errorf("shim %d: registered %g, want 1", k, got)
		}
		t.Run(fmt.Sprintf("promtool/backend-%d", k), func(t *testing.T) { expositiontest.Promtool(t, page) })
	}
}
