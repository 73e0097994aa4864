package conf

import (
	"strings"
	"testing"

	"github.com/qsplice/qsplice/sched"
)

// feedback.content.tree_path sets the path template of the content trees
// below M (issue 10); without it the default applies.
func TestFeedbackTreePath(t *testing.T) {
	fb := strings.Replace(minimal, minimalListeners, "listeners: [{vip: 198.18.0.100, port: 80, policy: feedback}]\n", 1)
	for _, tc := range []struct{ yaml, want string }{
		{"feedback:\n  content: {trees: 3, a: 0.001, tree_path: \"/q{tree}/{path}\"}\n", "/q{tree}/{path}"},
		{"feedback:\n  content: {trees: 3, a: 0.001}\n", sched.DefaultFeedbackTreePath},
	} {
		f, err := Parse("front.yaml", []byte(fb+tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Feedback.Policy.TreePath; got != tc.want {
			t.Errorf("TreePath %q, want %q", got, tc.want)
		}
	}
}
