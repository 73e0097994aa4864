package lab

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// TestShortConnectionsThroughTheSYNFastPath runs 960 one-request
// connections, 16 at a time, through the VIP of a lab whose shim runs the
// SYN fast path, and checks what it must keep: every response arrives
// whole and exact (a request the shim sent again after the kernel took it
// with the SYN made the server reset the connection: docs/results.md,
// twenty-second session); the back-end's kernel took the front-end's
// SYNs that carried their request (a request carried in its Splice: one
// whose back-end had a slot free) from the wire; the shim understood
// every one of them (FastOpenFromFrontEnd: its SYN-ACK acknowledged the
// request, whichever of the SYN's copy, the SYN-ACK and the Splice it
// read first); and it dropped no reply. Without the pool of C2s
// (-pool-c2=false), which would give most of these connections a C2
// with no SYN at all.
func TestShortConnectionsThroughTheSYNFastPath(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	cfg.Backends, cfg.Nginx = 1, false // the test server on 8080 takes Fast Open too
	cfg.FrontendArgs = append(cfg.FrontendArgs, "-pool-c2=false")
	l := upLab(t, cfg)
	client := l.HTTPClient("c1")
	client.Transport.(*http.Transport).DisableKeepAlives = true // a connection per request
	defer client.CloseIdleConnections()

	const workers, each = 16, 60
	url := fmt.Sprintf("http://%s:8080/data/1K", VIP)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := getExact(client, url, 1<<10); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var st struct {
		SYNFastPath string                         `json:"syn_fastpath"`
		SYNFast     struct{ Frames, Bytes uint64 } `json:"syn_fast_path"`
		Shim        struct {
			SYNsByKernel, FastOpenFromFrontEnd, FastOpenRepliesDropped uint64
		} `json:"shim"`
	}
	statusURL := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), BackendAdminPort)
	if _, err := GetJSON(context.Background(), l.HTTPClient("c1"), statusURL, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("SYN fast path %q %+v, shim %+v", st.SYNFastPath, st.SYNFast, st.Shim)
	const conns = workers * each
	if st.SYNFastPath != "tcx: ingress" || st.SYNFast.Frames < conns/4 || st.Shim.SYNsByKernel != st.SYNFast.Frames {
		t.Errorf("the kernel took %d SYNs with data (%q), the shim counted %d; want a good part of %d, counted alike",
			st.SYNFast.Frames, st.SYNFastPath, st.Shim.SYNsByKernel, conns)
	}
	if st.Shim.FastOpenFromFrontEnd != st.Shim.SYNsByKernel {
		t.Errorf("the shim understood %d of the %d SYNs the kernel took", st.Shim.FastOpenFromFrontEnd, st.Shim.SYNsByKernel)
	}
	if st.Shim.FastOpenRepliesDropped != 0 {
		t.Errorf("the shim dropped %d replies that came before their SYN-ACK or Splice", st.Shim.FastOpenRepliesDropped)
	}

	// The front-end's SYN answer: Linux's SYNs are all the kernel's to
	// answer, the engine answered none of them itself, and with the SYNs
	// hidden (frontend/synhide.go) it never saw one, but accepted every
	// connection.
	var fe struct {
		SYNAnswer string `json:"syn_answer"`
		Answered  uint64 `json:"syns_answered_by_link"`
		Hidden    bool   `json:"syns_hidden"`
		Engine    struct {
			SynCookiesSent   uint64 `json:"syn_cookies_sent"`
			SynCookiesByLink uint64 `json:"syn_cookies_by_link"`
			Accepted         uint64 `json:"accepted"`
		} `json:"engine"`
	}
	if _, err := GetJSON(context.Background(), l.HTTPClient("c1"), AdminURL+"/status", &fe); err != nil {
		t.Fatal(err)
	}
	t.Logf("front-end: SYN answer %q, %d answered by the link; engine %+v", fe.SYNAnswer, fe.Answered, fe.Engine)
	if fe.SYNAnswer != "tcx: ingress" || fe.Answered < conns || fe.Engine.SynCookiesSent != 0 {
		t.Errorf("want every one of %d SYNs answered by the link (tcx: ingress) and none by the engine", conns)
	}
	if !fe.Hidden || fe.Engine.SynCookiesByLink != 0 || fe.Engine.Accepted < conns {
		t.Errorf("want the SYNs hidden from the engine (it saw %d) and all %d connections accepted (%d)",
			fe.Engine.SynCookiesByLink, conns, fe.Engine.Accepted)
	}
}

// getExact fetches url (the VIP's /data/SIZE) and checks the response's
// body against the content of the back-end that says it answered, which
// it returns.
func getExact(client *http.Client, url string, size int64) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET %s: body: %w", url, err)
	}
	id, err := strconv.Atoi(resp.Header.Get("X-Backend-Id"))
	if resp.StatusCode != http.StatusOK || err != nil {
		return 0, fmt.Errorf("GET %s: %s, X-Backend-Id %q", url, resp.Status, resp.Header.Get("X-Backend-Id"))
	}
	if int64(len(body)) != size || sha256.Sum256(body) != content.SHA256(uint32(id), size) {
		return 0, fmt.Errorf("GET %s: %d bytes from back-end %d do not match its content", url, len(body), id)
	}
	return id, nil
}
