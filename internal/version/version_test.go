package version

import (
	"bytes"
	"flag"
	"runtime"
	"strings"
	"testing"
)

// TestLinkedVersionWins: a Version set at link time is what String and
// Line report, whatever the build information says.
func TestLinkedVersionWins(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "v1.2.3-4-gabcdef0-dirty"
	if got := String(); got != Version {
		t.Errorf("String() = %q, want %q", got, Version)
	}
	line := Line("qsplice-x")
	if !strings.HasPrefix(line, "qsplice-x v1.2.3-4-gabcdef0-dirty (") || !strings.Contains(line, runtime.Version()) {
		t.Errorf("Line = %q", line)
	}
}

// TestFallbackIsNeverEmpty: without -ldflags the version comes from the
// build information (a test binary has no VCS stamp: "unknown" or the
// module's version), never "".
func TestFallbackIsNeverEmpty(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = ""
	if String() == "" {
		t.Error("String() is empty")
	}
}

// TestFlagPrintsOnlyWhenGiven: Print writes the line and says so only
// when -version was on the command line.
func TestFlagPrintsOnlyWhenGiven(t *testing.T) {
	for _, args := range [][]string{nil, {"-version"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		r := Flag(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		given := len(args) > 0
		if r.Print(&b, "qsplice-x") != given || (b.Len() > 0) != given {
			t.Errorf("args %q: Print reported %v and wrote %q", args, !given, b.String())
		}
	}
}
