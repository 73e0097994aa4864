package calibrate

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/conf"
)

// modelProbe is a cluster whose capacity at size s is 1/(a + b*s)
// requests/s: below it every request is served in 20 ms; above it the
// queue grows through the step and the mean latency with it, and beyond
// 1.5 times it requests time out.
func modelProbe(a, b float64) func(context.Context, int64, float64, time.Duration) (Step, error) {
	return func(_ context.Context, size int64, rate float64, d time.Duration) (Step, error) {
		capacity := 1 / (a + b*float64(size))
		st := Step{OKRate: min(rate, capacity), MeanMs: 20, P50Ms: 20, P99Ms: 30}
		if rate > capacity {
			// The backlog grows at rate - capacity; a request waits for
			// the backlog ahead of it, on average half the step's.
			st.MeanMs = 20 + 1000*(rate-capacity)/capacity*d.Seconds()/2
			st.P99Ms = 20 + 1000*(rate-capacity)/capacity*d.Seconds()
		}
		if rate > 1.5*capacity {
			st.Errors = 1 - 1.5*capacity/rate
		}
		st.Bytes = st.OKRate * float64(size)
		return st, nil
	}
}

// Run on the model recovers a and b to within the rate steps'
// resolution (Factor 1.05: the largest clean step is within 5% of the
// capacity), and stops each size at its first failed step.
func TestRunOnAModelCluster(t *testing.T) {
	const a, b = 0.0008, 1e-8
	res, err := Run(context.Background(), Config{Sizes: []int64{1 << 10, 1 << 20}, Start: 20, Factor: 1.05,
		Pause: time.Nanosecond, Probe: modelProbe(a, b)})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.A-a)/a > 0.1 || math.Abs(res.B-b)/b > 0.1 {
		t.Errorf("a = %g, b = %g; want %g, %g within 10%%", res.A, res.B, a, b)
	}
	for _, s := range res.Sizes {
		last := s.Steps[len(s.Steps)-1]
		if !s.Saturated || !last.Failed || s.RMax > 1/(a+b*float64(s.Size)) {
			t.Errorf("size %d: saturated %v, last step %+v, Rmax %v", s.Size, s.Saturated, last, s.RMax)
		}
		for _, st := range s.Steps[:len(s.Steps)-1] {
			if st.Failed {
				t.Errorf("size %d: a failed step %+v before the last", s.Size, st)
			}
		}
	}
}

func TestRunRefusesAFailingStart(t *testing.T) {
	_, err := Run(context.Background(), Config{Sizes: []int64{1 << 10, 1 << 20}, Start: 5000, Pause: time.Nanosecond, Probe: modelProbe(0.0008, 1e-8)})
	if err == nil || !strings.Contains(err.Error(), "lower the start rate") {
		t.Errorf("start above the capacity: %v", err)
	}
}

// loadable writes text with the key file pointed at a key of its own and
// loads it as the front-end would.
func loadable(t *testing.T, text string) *conf.File {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("00112233445566778899aabbccddeeff0123456789abcdef102132435465768798\n"[:64]+"\n"), 0o600)
	text = strings.ReplaceAll(text, "/run/qsplice/lab/key", key)
	path := filepath.Join(dir, "fe.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := conf.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return f
}

// The commented example keeps every line but the values of a and b,
// comments included, and loads with the new numbers.
func TestRewriteConfigKeepsTheFile(t *testing.T) {
	orig, err := os.ReadFile("../../frontend/conf/testdata/feedback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := RewriteConfig(string(orig), 0.00123, 2.5e-9)
	if err != nil {
		t.Fatal(err)
	}
	ol, nl := strings.Split(string(orig), "\n"), strings.Split(out, "\n")
	if len(ol) != len(nl) {
		t.Fatalf("%d lines became %d", len(ol), len(nl))
	}
	var changed []string
	for i := range ol {
		if ol[i] != nl[i] {
			changed = append(changed, nl[i])
		}
	}
	if len(changed) != 2 || !strings.HasPrefix(strings.TrimSpace(changed[0]), "a: 0.00123 ") ||
		!strings.HasPrefix(strings.TrimSpace(changed[1]), "b: 2.5e-09 ") || !strings.Contains(changed[1], "# s per byte") {
		t.Fatalf("changed lines %q", changed)
	}
	p := loadable(t, out).Feedback.Policy
	if p.A != 0.00123 || p.B != 2.5e-9 || p.Trees != 3 {
		t.Errorf("loaded a %g, b %g, trees %d", p.A, p.B, p.Trees)
	}
}

// Missing keys and sections are added where they belong; a flow-style
// content section is refused rather than rewritten.
func TestRewriteConfigAddsWhatIsMissing(t *testing.T) {
	const head = "link: {interface: fe0}\nhandoff: 198.18.0.101\ncontrol: {listen: 198.18.0.2:7400, key_file: /run/qsplice/lab/key}\n" +
		"listeners:\n  - {vip: 198.18.0.100, port: 80, policy: feedback}\n"
	for name, text := range map[string]string{
		"no feedback":   head,
		"no content":    head + "feedback:\n  period: 50ms\n  classes:\n    - name: gold\n      weight: 3\n",
		"no a":          head + "feedback:\n  content:\n    trees: 3\n    b: 0\n  target_queue: 40\n",
		"content first": head + "feedback:\n  content:\n    trees: 3\n\n  # the loop\n  period: 50ms\n",
	} {
		out, err := RewriteConfig(text, 0.002, 3e-8)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		f := loadable(t, out)
		if p := f.Feedback.Policy; p.A != 0.002 || p.B != 3e-8 {
			t.Errorf("%s: a %g, b %g in\n%s", name, p.A, p.B, out)
		}
	}
	if _, err := RewriteConfig(head+"feedback:\n  content: {trees: 3, a: 0, b: 0}\n", 1, 1); err == nil {
		t.Error("flow-style content rewritten")
	}
}

func TestSnippetLoads(t *testing.T) {
	s := Snippet(0.0008, 1e-8)
	if !strings.Contains(s, "1/a = 1250.0 req/s") || !strings.Contains(s, "1/b = 100.0 MB/s") {
		t.Errorf("snippet %q", s)
	}
}
