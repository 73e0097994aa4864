package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// TestHandoffsAheadKeepTheConcurrencyCap: one back-end with 2 slots and
// 100 ms requests, 12 clients at once. The front-end sets up handoffs
// ahead of free slots (handoff_ahead 2), so some connections wait ready
// with C2 open; still the back-end never runs more than 2 requests at a
// time, every request is answered, and afterwards nothing is left waiting
// or counted in service.
func TestHandoffsAheadKeepTheConcurrencyCap(t *testing.T) {
	l := creditLabWith(t, 1, 2, 100*time.Millisecond, []lab.Customer{
		{Name: "A", Domains: []string{"a.example"}, Reservation: 100},
	}, "  typical_service_time: 100ms", "  queue_timeout: 10s")
	c := l.HTTPClient("c1")
	c.Timeout = 20 * time.Second
	c.Transport.(*http.Transport).DisableKeepAlives = true
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s:8080/data/1K", lab.VIP), nil)
			req.Host = "a.example"
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if n, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 || n != 1024 {
				errs <- fmt.Errorf("status %d, %d bytes, %v", resp.StatusCode, n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The last Feedback may still be on its way when the last response
	// has arrived: wait for the front-end to settle, with a deadline.
	var b frontend.BackendStatus
	for deadline := time.Now().Add(5 * time.Second); ; {
		st := frontendStatus(t, l)
		if len(st.Backends) != 1 {
			t.Fatalf("%d back-ends in the status", len(st.Backends))
		}
		b = st.Backends[0]
		if b.InService == 0 && b.Ready == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	shim := backendStatus(t, l, 1)["shim"].(map[string]any)
	if peak := shim["PeakActive"].(float64); peak > 2 || peak < 1 {
		t.Errorf("the back-end's shim saw %v requests in service at once; the cap is 2", peak)
	}
	t.Logf("back-end: served %d, held handoffs %d, peak reported concurrency %d, handoff %.1f ms, slot %.1f ms (service %.1f ms)",
		b.Served, b.HeldHandoffs, b.PeakReported, b.MeanHandoffMs, b.MeanSlotMs, b.MeanServiceMs)
	if b.HeldHandoffs == 0 {
		t.Error("no handoff waited for a slot: the test did not exercise handoffs ahead")
	}
	if b.PeakReported > 2 {
		t.Errorf("the back-end reported %d requests in service at once, over its cap of 2", b.PeakReported)
	}
	if b.InService != 0 || b.Ready != 0 {
		t.Errorf("after the run: %d in service, %d ready; want 0 and 0", b.InService, b.Ready)
	}
}
