package conf

import (
	"strings"
	"testing"
)

const classifyFile = minimal + `scheduler: {default_customer: other}
customers:
  - {name: A, domains: [a.example, "*.a.example"]}
  - {name: W, domains: ["www.a.example"]}
  - {name: B, domains: ["*.b.example"]}
  - {name: N, domains: ["198.18.0.100"]}
`

func TestClassify(t *testing.T) {
	f, err := Parse("front.yaml", []byte(classifyFile))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 250) + ".a.example"
	for host, want := range map[string]string{
		"a.example":         "A",
		"shop.a.example":    "A",     // wildcard
		"www.a.example":     "W",     // exact beats wildcard
		"x.www.a.example":   "other", // a wildcard covers one label only
		"x.shop.a.example":  "other", // likewise
		"A.Example":         "A",     // case
		"SHOP.A.EXAMPLE":    "A",     // case, wildcard
		"a.example:8080":    "A",     // port
		"a.example.":        "A",     // trailing dot
		"WWW.a.example.:80": "W",     // all at once
		"b.example":         "other", // "*.b.example" does not cover b.example
		"x.b.example":       "B",     //
		".b.example":        "other", // empty leftmost label
		"198.18.0.100:80":   "N",     // an address may be listed
		"c.example":         "other", // default
		"":                  "other", // no Host header
		":80":               "other", //
		"a.example:http":    "other", // not a port
		"[::1]:80":          "other", // IPv6 literal
		long:                "other", // longer than any DNS name
		"a.example\x00":     "other", // junk
		"a.example.x":       "other", //
		"xa.example":        "other", // suffix match is by label, not by text
		"a..a.example":      "other", //
		"ä.a.example":       "A",     // any first label, even a bad one
		"a.exAmple:":        "A",     // empty port
	} {
		if got := f.Classify(host); got != want {
			t.Errorf("Classify(%q) = %q, want %q", host, got, want)
		}
	}
}

// The front-end classifies every request: the lookup must not allocate.
func TestClassifyDoesNotAllocate(t *testing.T) {
	f, err := Parse("front.yaml", []byte(classifyFile))
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"a.example", "Shop.A.Example:8080", "c.example.", "www.a.example"}
	allocs := testing.AllocsPerRun(100, func() {
		for _, h := range hosts {
			f.Classify(h)
		}
	})
	if allocs != 0 {
		t.Errorf("Classify allocates %v times per round", allocs)
	}
}

func BenchmarkClassify(b *testing.B) {
	f, err := Parse("front.yaml", []byte(classifyFile))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f.Classify("Shop.A.Example:8080")
	}
}
