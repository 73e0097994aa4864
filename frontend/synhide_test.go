package frontend

import (
	"errors"
	"testing"
)

// TestSYNsHiddenOnlyWhereNothingNeedsThem: the links hide the answered
// SYNs only with the program on, without -timeline, and on a link that
// is no bridge's or bond's port (where a socket of one protocol reads
// nothing); each refusal says why.
func TestSYNsHiddenOnlyWhereNothingNeedsThem(t *testing.T) {
	plain := func(string) (int, error) { return 0, nil }
	port := func(string) (int, error) { return 7, nil }
	gone := func(string) (int, error) { return 0, errors.New("no such device") }
	cases := []struct {
		name      string
		answering bool
		timeline  string
		master    func(string) (int, error)
		want      bool
	}{
		{"the program on a plain link", true, "", plain, true},
		{"no program", false, "", plain, false},
		{"timelines", true, "/tmp/t.jsonl", plain, false},
		{"a bridge's port", true, "", port, false},
		{"a link netlink cannot find", true, "", gone, false},
	}
	for _, c := range cases {
		cfg := &Config{Link: "eth0", Timeline: c.timeline}
		got, why := hidesSYNsOf(cfg, c.answering, c.master)
		if got != c.want || got != (why == "") {
			t.Errorf("%s: hides %v (%q), want %v and a reason exactly when not", c.name, got, why, c.want)
		}
	}
}
