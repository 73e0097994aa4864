package docs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// root is the repository root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func loadRepo(t *testing.T) *Repo {
	t.Helper()
	r, err := LoadRepo(root(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readDoc(t *testing.T, r *Repo, p string) Doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return Doc{Path: p, Text: string(b)}
}

// TestDocumentsNameOnlyWhatExists: every path, test name, make target,
// binary, link and architecture section the README and the documents
// name exists, and none leads outside the repository.
func TestDocumentsNameOnlyWhatExists(t *testing.T) {
	r := loadRepo(t)
	docs := r.Documents()
	for _, want := range []string{"README.md", "docs/architecture.md", "docs/results.md"} {
		if !strings.Contains(strings.Join(docs, " "), want) {
			t.Errorf("document %s missing", want)
		}
	}
	for _, p := range docs {
		d := readDoc(t, r, p)
		refs := len(Spans(d))
		if p == "README.md" && refs < 100 {
			t.Errorf("README.md: only %d code spans found; the span parser is broken", refs)
		}
		for _, pr := range r.Check(d) {
			t.Error(pr)
		}
	}
}

// TestCodeCommentsPointInsideTheRepository: no Go file sends its reader
// to a document outside the repository, and every "docs/architecture.md
// §N" names a section that exists.
func TestCodeCommentsPointInsideTheRepository(t *testing.T) {
	r := loadRepo(t)
	if len(r.sections) < 9 {
		t.Fatalf("docs/architecture.md: %d numbered sections, want 9: %v", len(r.sections), r.sections)
	}
	ps, err := r.CheckGoComments()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Error(p)
	}
}

// TestCheckerCatchesBrokenReferences feeds the checker a made-up README
// with one broken reference of each kind, and one good one: each broken
// one must be reported, the good ones not.
func TestCheckerCatchesBrokenReferences(t *testing.T) {
	r := loadRepo(t)
	cases := []struct {
		name, text string
		bad        bool
	}{
		{"missing file", "See `splice/no_such_file.go` for the rest.", true},
		{"missing directory", "The lab lives in `tools/nolab`.", true},
		{"outside the repository", "Details in `../shared/design.md`.", true},
		{"outside, in prose", "Details in the design notes (design.md section 7).", true},
		{"missing make target", "Run `make no-such-target`.", true},
		{"missing make target in a shell block", "```sh\nmake demo\nmake nothing-here\n```", true},
		{"missing binary", "Start `qsplice-nothing -config FILE`.", true},
		{"missing test", "Pinned by `TestThisTestDoesNotExist`.", true},
		{"missing test prefix", "All `TestNoSuchPrefix*` tests.", true},
		{"flag-only span of a missing binary", "- `qsplice-nothing`: runs with\n  `-workers N`.", true},
		{"missing go test package", "Run `go test ./sched/nosim -run Published`.", true},
		{"go test pattern matching nothing", "Run `go test ./tools/sim -run NoSuchTestAnywhere`.", true},
		{"broken link", "See [the notes](docs/nothing.md).", true},
		{"broken anchor", "See [the picture](docs/architecture.md#no-such-heading).", true},
		{"missing section", "As `docs/architecture.md §42` says.", true},
		{"bare file name that exists nowhere", "Read `nothing_here.go`.", true},
		{"span over a line break", "The file `splice/\nmissing.go` is gone.", true},
		{"missing Go declaration", "Call `link.NoSuchFunction`.", true},
		{"missing package", "Call `splice/nolink.Impair`.", true},

		{"good file", "See `splice/shard.go` and `splice/wire`.", false},
		{"good Go declarations", "See `link.DisableOffloads`, `splice/link.Impair`, `wire.IPv4.SetSrc`, `os.Exit`.", false},
		{"good test", "Pinned by `TestShardedFrontEnd` and `TestAdversarial*`.", false},
		{"good make", "Run `make fuzz FUZZTIME=5m` or `make -n test`.", false},
		{"good binary", "Start `qsplice-frontend -config FILE`.", false},
		{"good go test", "Run `go test ./tools/sim -v -run Published`.", false},
		{"good link", "See [the picture](docs/architecture.md#1-the-picture).", false},
		{"good section", "As docs/architecture.md §7 says.", false},
		{"output paths are not repository paths", "Writes `out/experiment/lab.csv` and `lab.json`.", false},
		{"addresses and patterns are not paths", "On `198.18.0.0/15`, `qsplice_customer_*{customer}`, `/etc/qsplice`.", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := r.Check(Doc{Path: "README.md", Text: c.text})
			if c.bad && len(ps) == 0 {
				t.Errorf("no problem reported for %q", c.text)
			}
			if !c.bad && len(ps) > 0 {
				t.Errorf("problems reported for a good reference %q: %v", c.text, ps)
			}
		})
	}
}

// binaries builds every command once (or uses QSPLICE_BIN, which the
// Makefile sets) and returns the directory holding them.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func binaries(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("QSPLICE_BIN"); d != "" {
		return d
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "qsplice-docs-bin-")
		if err != nil {
			binErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
		cmd.Dir = root(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			t.Logf("%s", out)
			return
		}
		binDir = dir
	})
	if binErr != nil {
		t.Fatalf("building the binaries: %v", binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// runHelp runs a binary with args and returns what it printed; help goes
// to stdout or stderr and some subcommands exit 2 after it, so only a
// hang or silence is an error.
func runHelp(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: did not finish", bin, args)
	}
	return out.String()
}

// TestEveryBinaryTakesHelpAndVersion: the README says every binary takes
// -h, which explains its flags, and -version.
func TestEveryBinaryTakesHelpAndVersion(t *testing.T) {
	r := loadRepo(t)
	dir := binaries(t)
	for name := range r.binaries {
		bin := filepath.Join(dir, name)
		if out, err := exec.Command(bin, "-h").CombinedOutput(); err != nil || !strings.Contains(string(out), "-") {
			t.Errorf("%s -h: %v\n%s", name, err, out)
		}
		out, err := exec.Command(bin, "-version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), name+" ") {
			t.Errorf("%s -version: %v: %q", name, err, out)
		}
	}
}

// TestDocumentedFlagsExist: every flag a document's command passes to a
// qsplice binary is listed by that binary's -h (or its subcommand's).
func TestDocumentedFlagsExist(t *testing.T) {
	r := loadRepo(t)
	dir := binaries(t)
	helps := map[string]string{}
	help := func(tool string, sub []string) string {
		key := tool + " " + strings.Join(sub, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		bin := filepath.Join(dir, tool)
		h := runHelp(t, bin, "-h")
		for _, s := range sub {
			h += runHelp(t, bin, s, "-h")
		}
		helps[key] = h
		return h
	}
	checked := 0
	for _, p := range r.Documents() {
		for _, c := range Commands(readDoc(t, r, p)) {
			if c.Tool == "make" || c.Tool == "go" || !r.binaries[c.Tool] {
				continue // targets and missing binaries: TestDocumentsNameOnlyWhatExists
			}
			h := help(c.Tool, Subcommands(c))
			for _, f := range c.Flags {
				checked++
				if !regexp.MustCompile(`(^|[^A-Za-z0-9-])-` + regexp.QuoteMeta(f) + `([^A-Za-z0-9-]|$)`).MatchString(h) {
					t.Errorf("%s:%d: %q: %s -h lists no -%s", c.Doc, c.Line, c.Text, c.Tool, f)
				}
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d documented flags found; the command parser is broken", checked)
	}
}

// TestReadmeMakeCommandsDryRun: every make command the README and the
// documents name runs as `make -n` (the targets exist, the variables
// parse, nothing is executed but recursive makes, also dry).
func TestReadmeMakeCommandsDryRun(t *testing.T) {
	r := loadRepo(t)
	seen := map[string]bool{}
	for _, p := range r.Documents() {
		for _, c := range Commands(readDoc(t, r, p)) {
			if c.Tool != "make" || seen[c.Text] {
				continue
			}
			seen[c.Text] = true
			args := append([]string{"-n"}, strings.Fields(c.Text)[1:]...)
			cmd := exec.Command("make", args...)
			cmd.Dir, cmd.Env = r.Root, makeEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s:%d: make %s: %v\n%s", c.Doc, c.Line, strings.Join(args, " "), err, out)
			}
		}
	}
	for _, want := range []string{"make demo", "make test", "make install"} {
		if !seen[want] {
			t.Errorf("the README no longer names %q; was it moved?", want)
		}
	}
}

// makeEnv is the environment for a make the tests run: without what a
// surrounding make (make unit runs these tests) or the caller's FUZZTIME
// would pass down, so the Makefile alone decides.
func makeEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "FUZZTIME":
			continue
		}
		env = append(env, e)
	}
	return env
}

// TestMakeFuzzHonoursFUZZTIME: `make fuzz FUZZTIME=5m`, as the README
// says, runs every fuzz target for 5 minutes, and plain `make fuzz` for
// its documented default of two.
func TestMakeFuzzHonoursFUZZTIME(t *testing.T) {
	r := loadRepo(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "fuzz", "FUZZTIME=5m"}, "-fuzztime=5m"},
		{[]string{"-n", "fuzz"}, "-fuzztime=2m"},
		{[]string{"-n", "fuzz-short"}, "-fuzztime=8s"},
	} {
		cmd := exec.Command("make", c.args...)
		cmd.Dir, cmd.Env = r.Root, makeEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %v: %v\n%s", c.args, err, out)
		}
		if !strings.Contains(string(out), c.want) || strings.Count(string(out), "-fuzztime=") != strings.Count(string(out), c.want) {
			t.Errorf("make %v: want every target run with %s, got:\n%s", c.args, c.want, out)
		}
	}
}

// shellPolicy says what TestReadmeShellLines does with each kind of line
// of the README's sh blocks, and why.
var shellPolicy = []struct {
	re     *regexp.Regexp
	action string // "run", "dry-run", "flags", "skip"
	why    string
}{
	{regexp.MustCompile(`^make\b`), "dry-run", "make -n (TestReadmeMakeCommandsDryRun): the real targets need root, a lab and minutes"},
	{regexp.MustCompile(`^qsplice-frontend (genkey|derivekey)\b`), "run", "makes keys; run with /etc/qsplice replaced by a temporary directory"},
	{regexp.MustCompile(`^qsplice-frontend validate\b`), "skip", "needs the edited example in /etc/qsplice; tools/packaging validates every example file"},
	{regexp.MustCompile(`^qsplice-`), "flags", "daemons and tools need root and a lab; their flags are checked against -h (TestDocumentedFlagsExist)"},
	{regexp.MustCompile(`^(systemd-sysusers|systemctl|install|cp|chown)\b`), "skip", "changes the host's users, /etc or systemd; tools/packaging checks the installed tree and the units"},
	{regexp.MustCompile(`^(wireshark|tshark) -X lua_script:contrib/wireshark/qsplice\.lua\b`), "skip", "needs a capture of a lab run; contrib/wireshark's tests and TestLabCaptureShowsControlMessagesInWireshark run the dissector"},
}

// TestReadmeShellLines classifies every line of the README's sh blocks
// and runs the ones that are safe: the key commands, into a temporary
// directory. A new kind of line fails until this test says what to do
// with it.
func TestReadmeShellLines(t *testing.T) {
	r := loadRepo(t)
	d := readDoc(t, r, "README.md")
	tmp := t.TempDir()
	var ran int
	for _, l := range ShellLines(d) {
		matched := false
		for _, p := range shellPolicy {
			if !p.re.MatchString(l.Text) {
				continue
			}
			matched = true
			t.Logf("README.md:%d: %s: %s (%s)", l.Line, p.action, l.Text, p.why)
			if p.action != "run" {
				break
			}
			line := strings.ReplaceAll(l.Text, "/etc/qsplice/", tmp+"/")
			f := strings.Fields(line)
			cmd := exec.Command(filepath.Join(binaries(t), f[0]), f[1:]...)
			cmd.Dir = tmp
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("README.md:%d: %s: %v\n%s", l.Line, line, err, out)
				break
			}
			for i, w := range f {
				if w == "-o" && i+1 < len(f) {
					out := f[i+1]
					if !filepath.IsAbs(out) {
						out = filepath.Join(tmp, out)
					}
					st, err := os.Stat(out)
					if err != nil {
						t.Errorf("README.md:%d: %s wrote no %s: %v", l.Line, line, out, err)
					} else if st.Mode().Perm() != 0o600 {
						t.Errorf("README.md:%d: %s: %s has mode %v, the README says 0600", l.Line, line, out, st.Mode().Perm())
					}
				}
			}
			ran++
			break
		}
		if !matched {
			t.Errorf("README.md:%d: %q: no policy for this shell line; add one to shellPolicy (run it, dry-run it, or say why not)", l.Line, l.Text)
		}
	}
	if ran < 2 {
		t.Errorf("ran %d README shell lines; the key block (genkey, derivekey) should run", ran)
	}
}

// TestFlagsOfSkipsQuotedValuesAndOtherPrograms: flags inside a quoted
// value and after " -- " belong to something else.
func TestFlagsOfSkipsQuotedValuesAndOtherPrograms(t *testing.T) {
	got := flagsOf(`qsplice-lab up -name x -frontend-args "-timeline F -capture G" -backends 2`)
	if strings.Join(got, ",") != "name,frontend-args,backends" {
		t.Errorf("quoted: %v", got)
	}
	got = flagsOf(`qsplice-lab exec -name x c1 -- wrk -t2 -c16 http://vip/`)
	if strings.Join(got, ",") != "name" {
		t.Errorf("after --: %v", got)
	}
}
