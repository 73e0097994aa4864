package content

import (
	"fmt"
	"strconv"
	"strings"
)

// Content trees (issue 10, content adaptation). A site is served in M
// trees of falling quality: tree M is the full site under its plain
// paths, tree k < M the same site, cheaper, under TreePrefix k
// ("/tree2/data/64K"). The front-end's feedback policy picks a tree per
// request and rewrites the request target to the tree's path; the test
// server and the lab's nginx serve every tree; a client recomputes the
// body of the tree it was served and checks it byte for byte.
//
// Tree k of M costs k/M of the full tree: its bodies are TreeSize bytes
// and the test server's service time is scaled the same way, so a client
// served tree k takes k/M of the back-end's work, as the simulator
// (tools/sim) models it.

// TreePrefix is the path prefix of content tree k: "/tree<k>". The full
// tree (k = M) is also served under its plain paths.
func TreePrefix(tree int) string { return "/tree" + strconv.Itoa(tree) }

// TreePath is path in tree k of trees: path itself for the full tree,
// TreePrefix(k)+path below it.
func TreePath(path string, tree, trees int) string {
	if tree >= trees {
		return path
	}
	return TreePrefix(tree) + path
}

// SplitTreePath reads a path that TreePath wrote: the tree (trees for a
// plain path) and the path inside the tree. A /tree<k> prefix with k
// outside 1..trees is an error.
func SplitTreePath(path string, trees int) (tree int, rest string, err error) {
	after, ok := strings.CutPrefix(path, "/tree")
	if !ok {
		return trees, path, nil
	}
	i := 0
	for i < len(after) && after[i] >= '0' && after[i] <= '9' {
		i++
	}
	if i == 0 || i > 3 || i < len(after) && after[i] != '/' {
		return trees, path, nil // "/treehouse": a plain path
	}
	k, _ := strconv.Atoi(after[:i])
	if k < 1 || k > trees || after[0] == '0' {
		return 0, "", fmt.Errorf("content: tree %q of %d trees", after[:i], trees)
	}
	rest = after[i:]
	if rest == "" {
		rest = "/"
	}
	return k, rest, nil
}

// TreeSize is the size of the body of full size in tree k of trees:
// size*k/trees rounded down, the full size for the full tree.
func TreeSize(size int64, tree, trees int) int64 {
	if tree >= trees || trees < 1 {
		return size
	}
	if tree < 1 {
		return 0
	}
	// size*k may overflow for huge sizes; divide first, then the rest.
	t, m := int64(tree), int64(trees)
	return size/m*t + size%m*t/m
}

// NewTreeBody is the body of (backendID, size) in tree k of trees: the
// plain body (NewBody) for the full tree, TreeSize bytes of another
// sequence for each lower tree, so a body served from the wrong tree is
// caught even where the sizes happen to agree.
func NewTreeBody(backendID uint32, size int64, tree, trees int) *Body {
	n := TreeSize(size, tree, trees)
	if tree >= trees {
		return NewBody(backendID, n)
	}
	return &Body{seed: mix64(seedOf(backendID, size) ^ uint64(tree)<<48 ^ golden), size: max(n, 0)}
}
