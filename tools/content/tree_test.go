package content

import (
	"bytes"
	"io"
	"testing"
)

func TestTreePathRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		path       string
		tree, of   int
		want       string
		wantSplitK int
	}{
		{"/data/64K", 3, 3, "/data/64K", 3},
		{"/data/64K", 2, 3, "/tree2/data/64K", 2},
		{"/img/a.jpg", 1, 3, "/tree1/img/a.jpg", 1},
		{"/", 1, 2, "/tree1/", 1},
	} {
		got := TreePath(tc.path, tc.tree, tc.of)
		if got != tc.want {
			t.Errorf("TreePath(%q, %d, %d) = %q, want %q", tc.path, tc.tree, tc.of, got, tc.want)
		}
		k, rest, err := SplitTreePath(got, tc.of)
		if err != nil || k != tc.wantSplitK || rest != tc.path {
			t.Errorf("SplitTreePath(%q, %d) = %d, %q, %v; want %d, %q", got, tc.of, k, rest, err, tc.wantSplitK, tc.path)
		}
	}
}

func TestSplitTreePathEdges(t *testing.T) {
	for _, tc := range []struct {
		path    string
		tree    int
		rest    string
		wantErr bool
	}{
		{"/treehouse/x", 3, "/treehouse/x", false}, // not a tree prefix
		{"/tree", 3, "/tree", false},
		{"/tree3/data/1K", 3, "/data/1K", false}, // the full tree by prefix too
		{"/tree4/data/1K", 0, "", true},          // above M
		{"/tree0/data/1K", 0, "", true},          // tree 0 is a refusal, never a path
		{"/tree02/data/1K", 0, "", true},
		{"/tree2", 2, "/", false},
	} {
		k, rest, err := SplitTreePath(tc.path, 3)
		if (err != nil) != tc.wantErr || k != tc.tree || rest != tc.rest {
			t.Errorf("SplitTreePath(%q, 3) = %d, %q, %v", tc.path, k, rest, err)
		}
	}
}

// Tree sizes fall with the tree: 64 KiB in 3 trees is 21845, 43690 and
// 65536 bytes.
func TestTreeSize(t *testing.T) {
	want := []int64{0, 21845, 43690, 65536}
	for k := range 4 {
		if got := TreeSize(64<<10, k, 3); got != want[k] {
			t.Errorf("TreeSize(64K, %d, 3) = %d, want %d", k, got, want[k])
		}
	}
	if got := TreeSize(1<<62, 1, 2); got != 1<<61 {
		t.Errorf("TreeSize(2^62, 1, 2) = %d: overflowed", got)
	}
}

// The full tree's body is the plain body; lower trees have bodies of
// their own, not prefixes of the full one, and they repeat exactly.
func TestNewTreeBody(t *testing.T) {
	read := func(b *Body) []byte {
		data, err := io.ReadAll(b)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	full := read(NewBody(7, 4096))
	if !bytes.Equal(read(NewTreeBody(7, 4096, 3, 3)), full) {
		t.Error("tree M differs from the plain body")
	}
	t1, t2 := read(NewTreeBody(7, 4096, 1, 3)), read(NewTreeBody(7, 4096, 2, 3))
	if len(t1) != 1365 || len(t2) != 2730 {
		t.Fatalf("tree sizes %d, %d", len(t1), len(t2))
	}
	if bytes.Equal(t2, full[:len(t2)]) || bytes.Equal(t1, t2[:len(t1)]) {
		t.Error("a lower tree's body is a prefix of a higher one's")
	}
	if !bytes.Equal(read(NewTreeBody(7, 4096, 2, 3)), t2) {
		t.Error("tree body not deterministic")
	}
	if bytes.Equal(read(NewTreeBody(8, 4096, 2, 3)), t2) {
		t.Error("tree body does not depend on the back-end id")
	}
}

func FuzzSplitTreePath(f *testing.F) {
	for _, s := range []string{"/tree2/data/1K", "/tree", "/tree9x", "/data/1K", "/tree255/"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, path string, trees int) {
		if trees < 1 || trees > 255 {
			return
		}
		k, rest, err := SplitTreePath(path, trees)
		if err != nil {
			return
		}
		if k < 1 || k > trees {
			t.Fatalf("tree %d of %d", k, trees)
		}
		if k < trees && TreePath(rest, k, trees) != path && TreePrefix(k)+"/" != path+"/" {
			t.Fatalf("TreePath(%q, %d) != %q", rest, k, path)
		}
	})
}
