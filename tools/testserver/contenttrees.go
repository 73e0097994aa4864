package testserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// TreeHeader names the content tree an answer came from, 1..Config.Trees
// (the full tree for plain paths): what the load generator counts per
// class and the e2e tests check the body against.
const TreeHeader = "X-Content-Tree"

// withTrees serves the content trees in front of mux: a /tree<k>/data/
// path gets tree k's body after k/M of the service time, another
// /tree<k>/ path the plain page, and every answer says its tree.
func (s *server) withTrees(mux *http.ServeMux) http.Handler {
	trees := s.cfg.Trees
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tree, rest, err := content.SplitTreePath(r.URL.Path, trees)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set(TreeHeader, strconv.Itoa(tree))
		if sizeText, ok := cutData(rest); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.serveTreeData(w, r, sizeText, tree)
			return
		}
		if rest != r.URL.Path {
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = rest, ""
			r = r2
		}
		mux.ServeHTTP(w, r)
	})
}

// cutData returns <size> of "/data/<size>".
func cutData(path string) (string, bool) {
	const prefix = "/data/"
	if len(path) <= len(prefix) || path[:len(prefix)] != prefix {
		return "", false
	}
	return path[len(prefix):], true
}

// serveTreeData answers /data/<size> from tree k.
func (s *server) serveTreeData(w http.ResponseWriter, r *http.Request, sizeText string, tree int) {
	size, err := content.ParseSize(sizeText)
	if err != nil {
		http.Error(w, "no such size: "+err.Error(), http.StatusNotFound)
		return
	}
	if !s.serviceWaitScaled(w, r, int64(tree), int64(s.cfg.Trees)) {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", time.Time{}, content.NewTreeBody(s.cfg.ID, size, tree, s.cfg.Trees))
}
