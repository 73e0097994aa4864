package sched

import (
	"strings"
	"testing"
)

func TestClassifierDefaultPatterns(t *testing.T) {
	classes := DefaultClasses()
	c, err := NewClassifier(classes, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/", "main"},                      // exact
		{"/index.html", "main"},            // exact
		{"/index.html?session=7", "main"},  // exact, query ignored
		{"/index.htm", "main"},             // no pattern: fallback
		{"/mainpage", "main"},              // prefix
		{"/browse", "browse"},              // prefix matches the bare prefix
		{"/browse/shoes?page=2", "browse"}, // prefix, query ignored
		{"/search?q=/login", "search"},     // a pattern in the query must not count
		{"/details/42", "details"},         // first of two prefixes
		{"/product/42", "details"},         // second of two prefixes
		{"/login", "login"},                // transaction classes
		{"/shipping/address", "shipping"},  //
		{"/payment", "payment"},            //
		{"/confirm?order=9", "confirm"},    //
		{"/favicon.ico", "main"},           // unknown: fallback
		{"", "main"},                       // empty target: fallback
		{"?login", "main"},                 // only a query: fallback
		{"/Login", "main"},                 // paths are case-sensitive
		{"/x/login", "main"},               // prefixes anchor at the start
	} {
		if got := classes[c.Classify(tc.path)].Name; got != tc.want {
			t.Errorf("Classify(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

// An exact pattern beats every prefix pattern, and the longest prefix
// wins whatever the class order.
func TestClassifierPrecedence(t *testing.T) {
	classes := []Class{
		{Name: "shop", Kind: Browsing, Utility: 1, Patterns: []string{"/shop*"}},
		{Name: "cart", Kind: Transaction, Utility: 2, Patterns: []string{"/shop/cart*"}},
		{Name: "home", Kind: Browsing, Utility: 1, Patterns: []string{"/shop/cart/help"}},
	}
	c, err := NewClassifier(classes, "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/shop/cart/help", "home"},
		{"/shop/cart/help?x", "home"},
		{"/shop/cart/help/more", "cart"},
		{"/shop/cart", "cart"},
		{"/shop/car", "shop"},
	} {
		if got := classes[c.Classify(tc.path)].Name; got != tc.want {
			t.Errorf("Classify(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

func TestClassifierErrors(t *testing.T) {
	ok := func() []Class {
		return []Class{
			{Name: "a", Kind: Browsing, Utility: 1, Patterns: []string{"/a*"}},
			{Name: "b", Kind: Transaction, Utility: 2, Patterns: []string{"/b"}},
		}
	}
	for _, tc := range []struct {
		name     string
		change   func([]Class)
		fallback string
		want     string
	}{
		{"no name", func(c []Class) { c[1].Name = "" }, "a", "Classes[1].Name"},
		{"twice", func(c []Class) { c[1].Name = "a" }, "a", `Classes[1].Name: "a" is also Classes[0]`},
		{"no kind", func(c []Class) { c[0].Kind = 0 }, "a", "Classes[0].Kind"},
		{"zero utility", func(c []Class) { c[1].Utility = 0 }, "a", "Classes[1].Utility"},
		{"negative cap", func(c []Class) { c[0].QueueCap = -1 }, "a", "Classes[0].QueueCap"},
		{"relative", func(c []Class) { c[1].Patterns = []string{"/b", "b*"} }, "a", "Classes[1].Patterns[1]"},
		{"inner star", func(c []Class) { c[0].Patterns = []string{"/a*/x"} }, "a", "Classes[0].Patterns[0]"},
		{"query", func(c []Class) { c[1].Patterns = []string{"/b?x=1"} }, "a", "Classes[1].Patterns[0]"},
		{"same pattern", func(c []Class) { c[1].Patterns = []string{"/a*"} }, "a", "Classes[1].Patterns[0]: \"/a*\" is also Classes[0].Patterns[0]"},
		{"fallback", func([]Class) {}, "c", `fallback class "c"`},
	} {
		classes := ok()
		tc.change(classes)
		_, err := NewClassifier(classes, tc.fallback)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewClassifier(ok(), "b"); err != nil {
		t.Fatalf("valid classes refused: %v", err)
	}
}

func TestClassifierDoesNotAllocate(t *testing.T) {
	c, err := NewClassifier(DefaultClasses(), "main")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/index.html?x=1", "/browse/a/b", "/confirm", "/nowhere"}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, p := range paths {
			c.Classify(p)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 4 Classify calls", allocs)
	}
}

func TestDefaultClassesMatchThePublishedModel(t *testing.T) {
	want := []struct {
		name    string
		kind    Kind
		utility float64
		cap     int
	}{
		{"main", Browsing, 27, 50}, {"browse", Browsing, 22, 50},
		{"search", Browsing, 36, 50}, {"details", Browsing, 73, 50},
		{"login", Transaction, 3650, 25}, {"shipping", Transaction, 4050, 25},
		{"payment", Transaction, 4500, 25}, {"confirm", Transaction, 5000, 25},
	}
	got := DefaultClasses()
	if len(got) != len(want) {
		t.Fatalf("%d default classes, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Kind != w.kind || g.Utility != w.utility || g.QueueCap != w.cap {
			t.Errorf("class %d: %s %v %v %d, want %s %v %v %d", i, g.Name, g.Kind, g.Utility, g.QueueCap,
				w.name, w.kind, w.utility, w.cap)
		}
	}
	got[0].Patterns[0] = "/changed"
	if DefaultClasses()[0].Patterns[0] != "/" {
		t.Fatal("DefaultClasses shares its pattern slices between calls")
	}
	if Browsing.String() != "browsing" || Transaction.String() != "transaction" || Kind(9).String() != "Kind(9)" {
		t.Fatalf("Kind strings: %v %v %v", Browsing, Transaction, Kind(9))
	}
}
