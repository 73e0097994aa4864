package backend

import (
	"strings"
	"testing"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// TestParseFastPathMode: the flag's three values and the empty default
// parse; anything else is refused naming the flag and the values.
func TestParseFastPathMode(t *testing.T) {
	for _, s := range []string{"", "off", "middle", "echo"} {
		if m, err := ParseFastPathMode(s); err != nil || string(m) != s {
			t.Errorf("%q: %q, %v", s, m, err)
		}
	}
	_, err := ParseFastPathMode("on")
	if err == nil || !strings.Contains(err.Error(), "reply-fastpath") || !strings.Contains(err.Error(), "middle") {
		t.Errorf(`"on": %v, want an error naming the flag and its values`, err)
	}
	if err := (&Config{ReplyFastPath: "on"}).validate(); err == nil || !strings.Contains(err.Error(), "reply-fastpath") {
		t.Errorf("validate: %v", err)
	}
}

// TestSupersededPut: of several commands for one connection in a pass,
// a Put is skipped when a later command names the same key.
func TestSupersededPut(t *testing.T) {
	var a, b wire.FastPathKey
	b[0] = 1
	ups := []splice.FastPathUpdate{{Key: a}, {Key: b}, {Key: a, Delete: true}}
	if !supersededPut(ups[1:], a) {
		t.Error("a Put followed by a command for its key was not superseded")
	}
	if supersededPut(ups[2:], b) {
		t.Error("a Put with no later command for its key was superseded")
	}
}
