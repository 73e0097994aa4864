package testserver

import (
	"strings"
	"testing"
)

// FuzzParseShopService: any flag value either fails with an error that
// quotes it, or gives non-negative means that format and parse back to
// the same means.
func FuzzParseShopService(f *testing.F) {
	for _, s := range []string{"", "main=150ms", "main=1s,confirm=0", "confirm=600ms,main=10ms ", "main=-1s",
		"nope=1s", "main=1s,main=2s", "main", "main=1h2m3.5s,browse=1us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		means, err := ParseShopService(s)
		if err != nil {
			if !strings.Contains(err.Error(), "shop service") {
				t.Fatalf("error %q does not say what it was parsing", err)
			}
			return
		}
		for p, d := range means {
			if d < 0 {
				t.Fatalf("page %d: negative mean %v from %q", p, d, s)
			}
		}
		again, err := ParseShopService(FormatShopService(means))
		if err != nil || again != means {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, means, FormatShopService(means), again, err)
		}
	})
}
