package sched

import (
	"strings"
	"testing"
)

func TestAppendTreePathFillsTheTemplate(t *testing.T) {
	for _, tc := range []struct {
		template string
		tree     uint8
		path     string
		want     string
	}{
		{DefaultFeedbackTreePath, 2, "/img/a.jpg", "/tree2/img/a.jpg"},
		{"/tree{tree}/{path}", 2, "/img/a.jpg", "/tree2/img/a.jpg"},
		{"/q{tree}{path}", 255, "/", "/q255/"},
		{"/lo/{path}/t{tree}", 1, "/x", "/lo/x/t1"},
		{"/{x}{path}", 3, "/y", "/{x}/y"},
	} {
		if got := string(AppendTreePath(nil, tc.template, tc.tree, tc.path)); got != tc.want {
			t.Errorf("AppendTreePath(%q, %d, %q) = %q, want %q", tc.template, tc.tree, tc.path, got, tc.want)
		}
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendTreePath(buf[:0], DefaultFeedbackTreePath, 7, "/a/b") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestTreePathTemplateIsChecked(t *testing.T) {
	for _, bad := range []string{"tree{tree}{path}", "/tree{tree}", "/t{path}{path}", "/t {path}", "/t?{path}"} {
		_, err := FeedbackConfig{TreePath: bad}.withDefaults()
		if err == nil || !strings.Contains(err.Error(), "TreePath") {
			t.Errorf("template %q: %v", bad, err)
		}
	}
	cfg, err := FeedbackConfig{}.withDefaults()
	if err != nil || cfg.TreePath != DefaultFeedbackTreePath {
		t.Errorf("default: %q %v", cfg.TreePath, err)
	}
}
