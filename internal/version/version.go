// Package version says which build of qsplice is running: every binary
// under cmd/ prints Line for -version, and the daemons can report String
// (e.g. as a build_info metric).
//
// The Makefile sets Version at link time from `git describe --always
// --dirty`:
//
//	go build -ldflags "-X github.com/qsplice/qsplice/internal/version.Version=v0.1-3-gabc1234" ./cmd/...
//
// A binary built without it (go build, go install, go run) falls back to
// what the Go toolchain records in the binary: the module version for
// `go install ...@version`, else the VCS revision of a build inside a
// git checkout, marked -dirty when the tree had changes.
package version

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is set with -ldflags "-X ...Version=..."; empty otherwise.
var Version string

// ImportPath is the path -X needs to set Version.
const ImportPath = "github.com/qsplice/qsplice/internal/version"

// info is the toolchain's record of the build; ok is false for binaries
// built without module support.
var info, ok = debug.ReadBuildInfo()

// String is the version of this build: Version if set, else the module
// version, else the VCS revision (12 hex digits, "-dirty" when modified),
// else "unknown".
func String() string {
	if Version != "" {
		return Version
	}
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev := setting("vcs.revision"); rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if setting("vcs.modified") == "true" {
			rev += "-dirty"
		}
		return rev
	}
	return "unknown"
}

// Line is what -version prints: the command, its version, and the build's
// commit, commit time and toolchain when known, on one line.
func Line(cmd string) string {
	var extra []string
	if rev := setting("vcs.revision"); rev != "" {
		extra = append(extra, "commit "+rev)
	}
	if t := setting("vcs.time"); t != "" {
		extra = append(extra, t)
	}
	extra = append(extra, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("%s %s (%s)", cmd, String(), strings.Join(extra, ", "))
}

// Flag adds -version to fs; after fs.Parse, Print writes Line to w and
// reports whether the flag was given (the caller then exits 0).
func Flag(fs *flag.FlagSet) *Requested {
	r := &Requested{}
	fs.BoolVar(&r.set, "version", false, "print the version and exit")
	return r
}

// Requested is a -version flag added by Flag.
type Requested struct{ set bool }

// Print writes cmd's version line to w if -version was given, and
// reports whether it was.
func (r *Requested) Print(w io.Writer, cmd string) bool {
	if r.set {
		fmt.Fprintln(w, Line(cmd))
	}
	return r.set
}

func setting(key string) string {
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
