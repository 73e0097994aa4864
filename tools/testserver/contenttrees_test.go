package testserver

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// Each tree answers its own body, byte for byte, after its share of the
// service time, and says which tree it is.
func TestContentTreesServeEachTree(t *testing.T) {
	var w waits
	srv := start(t, Config{ID: 4, Trees: 3, ServiceTime: 30 * time.Millisecond, Wait: w.wait})
	for _, tc := range []struct {
		path    string
		tree    string
		k       int
		service time.Duration
	}{
		{"/data/64K", "3", 3, 30 * time.Millisecond},
		{"/tree3/data/64K", "3", 3, 30 * time.Millisecond},
		{"/tree2/data/64K", "2", 2, 20 * time.Millisecond},
		{"/tree1/data/64K", "1", 1, 10 * time.Millisecond},
	} {
		resp, body := do(t, srv, "GET", tc.path, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(TreeHeader) != tc.tree {
			t.Fatalf("%s: %s, tree %q", tc.path, resp.Status, resp.Header.Get(TreeHeader))
		}
		want, _ := io.ReadAll(content.NewTreeBody(4, 64<<10, tc.k, 3))
		if !bytes.Equal(body, want) {
			t.Errorf("%s: %d bytes, not tree %d's %d", tc.path, len(body), tc.k, len(want))
		}
		if d := w.take(); len(d) != 1 || d[0] != tc.service {
			t.Errorf("%s: service %v, want %v", tc.path, d, tc.service)
		}
	}
	if resp, _ := do(t, srv, "GET", "/tree4/data/1K", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("tree above M: %s", resp.Status)
	}
	if resp, body := do(t, srv, "GET", "/tree1/health", nil); resp.StatusCode != http.StatusOK ||
		resp.Header.Get(TreeHeader) != "1" || !bytes.HasPrefix(body, []byte("qsplice-testserver id=4")) {
		t.Errorf("/tree1/health: %s %q", resp.Status, body)
	}
}

// Without Trees the plain paths name no tree and /tree<k>/ is not
// served from the falling-size trees.
func TestContentTreesOffByDefault(t *testing.T) {
	srv := start(t, Config{ID: 1})
	resp, _ := do(t, srv, "GET", "/data/1K", nil)
	if resp.Header.Get(TreeHeader) != "" {
		t.Errorf("tree header without trees: %q", resp.Header.Get(TreeHeader))
	}
	if resp, body := do(t, srv, "GET", "/tree1/data/1K", nil); resp.StatusCode == http.StatusOK && len(body) != 1024 {
		t.Errorf("/tree1 without trees: %s, %d bytes: a falling-size tree", resp.Status, len(body))
	}
}
