package testserver

import (
	"crypto/sha256"
	"testing"

	"github.com/qsplice/qsplice/tools/content"
)

// TestTreeData: /tree<k>/data/<size> serves the size with a body of its
// own per tree, never /data's.
func TestTreeData(t *testing.T) {
	srv := start(t, Config{ID: 7, Wait: new(waits).wait})
	for _, k := range []int{1, 2} {
		resp, body := do(t, srv, "GET", "/tree"+string(rune('0'+k))+"/data/1K", nil)
		if resp.StatusCode != 200 || len(body) != 1024 || resp.Header.Get("X-Backend-Id") != "7" {
			t.Fatalf("tree %d: status %d, %d bytes, headers %v", k, resp.StatusCode, len(body), resp.Header)
		}
		sum := sha256.Sum256(body)
		if sum != content.SHA256(TreeBodyID(7, k), 1024) || sum == content.SHA256(7, 1024) {
			t.Fatalf("tree %d: not the tree's body", k)
		}
	}
	if a, b := content.SHA256(TreeBodyID(7, 1), 1024), content.SHA256(TreeBodyID(7, 2), 1024); a == b {
		t.Fatal("two trees share a body")
	}
	for _, p := range []string{"/treex/data/1K", "/other/data/1K", "/tree1/data/zz"} {
		if resp, _ := do(t, srv, "GET", p, nil); resp.StatusCode != 404 {
			t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
		}
	}
}
