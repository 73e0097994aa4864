package calibrate

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// RewriteConfig on any YAML text either refuses it or returns a text
// whose feedback.content has the new a and b, every other line of the
// input still there in order.
func FuzzRewriteConfig(f *testing.F) {
	for _, s := range []string{
		"feedback:\n  content:\n    a: 0  # x\n    b: 0\n",
		"link: {interface: fe0}\n",
		"feedback:\n  period: 50ms\n",
		"feedback:\n  content: {a: 1}\n",
		"feedback:\n  classes:\n    - name: gold\n  content:\n    trees: 3\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 2048 || strings.Contains(text, "*") {
			return // alias expansion makes yaml slow, and configurations have none
		}
		var in map[string]any
		if yaml.Unmarshal([]byte(text), &in) != nil || strings.Contains(text, "\t") || strings.Contains(text, "\r") {
			return
		}
		out, err := RewriteConfig(text, 0.001, 2e-8)
		if err != nil {
			return
		}
		var doc struct {
			Feedback struct {
				Content struct {
					A, B float64
				}
			}
		}
		if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("the rewritten text does not read: %v\n%s", err, out)
		}
		if doc.Feedback.Content.A != 0.001 || doc.Feedback.Content.B != 2e-8 {
			t.Fatalf("a, b = %v, %v in\n%s\nfrom\n%s", doc.Feedback.Content.A, doc.Feedback.Content.B, out, text)
		}
		// Every non-blank line of the input is still there, in order,
		// but those of a and b.
		outLines := strings.Split(out, "\n")
		i := 0
		for _, l := range strings.Split(text, "\n") {
			key, _, _ := strings.Cut(strings.TrimSpace(l), ":")
			if key = strings.TrimSpace(key); key == "" || key == "a" || key == "b" {
				continue // blank, or a key the rewrite replaces ("b :" is "b:")
			}
			for i < len(outLines) && outLines[i] != l {
				i++
			}
			if i == len(outLines) {
				t.Fatalf("line %q lost:\n%s\nfrom\n%s", l, out, text)
			}
			i++
		}
	})
}
