package testserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// Content trees, minimal (issue 10): GET /tree<k>/data/<size> serves a
// body of the size that differs from /data's and from every other
// tree's (content.NewBody(TreeBodyID(id, k), size)), so a client can
// tell, byte for byte, which tree a rewritten request was served from.
// The lab's full content trees (sizes falling per tree) are another
// piece of work; this is what the request-rewriting test needs.

// TreeBodyID is the content id of back-end id's tree k bodies.
func TreeBodyID(id uint32, k int) uint32 { return id + uint32(k)<<16 }

// trees registers the tree routes.
func (s *server) trees(mux *http.ServeMux) {
	mux.HandleFunc("GET /{tree}/data/{size}", s.treeData)
}

func (s *server) treeData(w http.ResponseWriter, r *http.Request) {
	k, err := strconv.Atoi(strings.TrimPrefix(r.PathValue("tree"), "tree"))
	if !strings.HasPrefix(r.PathValue("tree"), "tree") || err != nil || k < 0 || k > 255 {
		http.NotFound(w, r)
		return
	}
	size, err := content.ParseSize(r.PathValue("size"))
	if err != nil {
		http.Error(w, "no such size: "+err.Error(), http.StatusNotFound)
		return
	}
	if !s.serviceWait(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Tree", strconv.Itoa(k))
	http.ServeContent(w, r, "", time.Time{}, content.NewBody(TreeBodyID(s.cfg.ID, k), size))
}
