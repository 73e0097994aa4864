package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Repo is what a document may name: the repository's files, test
// functions, Makefile targets, binaries and architecture sections.
type Repo struct {
	Root     string
	paths    map[string]bool // every file and directory, slash-separated, relative to Root
	bases    map[string]bool // base names of every file
	top      map[string]bool // entries at the top level
	tests    map[string][]string
	targets  map[string]bool
	binaries map[string]bool
	sections map[int]string // architecture.md: section number -> heading
	anchors  map[string]map[string]bool
}

// skipDirs are never documentation targets: version control, build and
// run output.
var skipDirs = map[string]bool{".git": true, "bin": true, "out": true}

var (
	testFuncRE   = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	targetRE     = regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:([^=]|$)`)
	headingRE    = regexp.MustCompile(`(?m)^(#{1,6})\s+(.+?)\s*$`)
	numberedHead = regexp.MustCompile(`^(\d+)\.\s`)
)

// LoadRepo reads the repository at root.
func LoadRepo(root string) (*Repo, error) {
	r := &Repo{
		Root: root, paths: map[string]bool{}, bases: map[string]bool{}, top: map[string]bool{},
		tests: map[string][]string{}, targets: map[string]bool{}, binaries: map[string]bool{},
		sections: map[int]string{}, anchors: map[string]map[string]bool{},
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		r.paths[rel] = true
		if !strings.Contains(rel, "/") {
			r.top[rel] = true
		}
		if d.IsDir() {
			if strings.HasPrefix(rel, "cmd/") && strings.Count(rel, "/") == 1 {
				r.binaries[d.Name()] = true
			}
			return nil
		}
		r.bases[d.Name()] = true
		switch {
		case strings.HasSuffix(rel, "_test.go"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range testFuncRE.FindAllStringSubmatch(string(b), -1) {
				r.tests[m[1]] = append(r.tests[m[1]], path.Dir(rel))
			}
		case strings.HasSuffix(rel, ".md"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			r.anchors[rel] = anchorsOf(string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	for _, m := range targetRE.FindAllStringSubmatch(string(mk), -1) {
		r.targets[m[1]] = true
	}
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err == nil {
		for _, m := range headingRE.FindAllStringSubmatch(string(arch), -1) {
			if len(m[1]) != 2 {
				continue
			}
			if n := numberedHead.FindStringSubmatch(m[2]); n != nil {
				k, _ := strconv.Atoi(n[1])
				r.sections[k] = m[2]
			}
		}
	}
	return r, nil
}

// anchorsOf returns the GitHub-style anchors of a Markdown text's headings:
// lower case, punctuation dropped, spaces as hyphens.
func anchorsOf(text string) map[string]bool {
	a := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(stripFences(text), -1) {
		var b strings.Builder
		for _, c := range strings.ToLower(m[2]) {
			switch {
			case c == ' ':
				b.WriteByte('-')
			case c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				b.WriteRune(c)
			case c > 127:
				b.WriteRune(c)
			}
		}
		a[b.String()] = true
	}
	return a
}

// A Doc is one document: its repository path and its text.
type Doc struct {
	Path string // relative to the repository root, slash-separated
	Text string
}

// A Problem is one reference that does not hold.
type Problem struct {
	Doc  string
	Line int
	Ref  string
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %q: %s", p.Doc, p.Line, p.Ref, p.Why)
}

// A Span is an inline code span (between backquotes) outside fenced
// blocks, with the line it starts on and the block it belongs to (a
// paragraph, list item or table row), whitespace collapsed.
type Span struct {
	Line, Block int
	Text        string
}

// A ShellLine is one line of a fenced sh block, comment removed.
type ShellLine struct {
	Line int
	Text string
}

// stripFences blanks the lines of fenced blocks, keeping line numbers.
func stripFences(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// Spans returns the inline code spans of d.
func Spans(d Doc) []Span {
	lines := strings.Split(stripFences(d.Text), "\n")
	var spans []Span
	block := 0
	var open *Span // a span continuing over a line break
	var buf strings.Builder
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "|") || strings.HasPrefix(t, "#") || numberedHead.MatchString(t) {
			if open != nil && t == "" {
				open = nil // a blank line ends any span
				buf.Reset()
			}
			if open == nil {
				block++
			}
		}
		rest := l
		if open != nil {
			j := strings.IndexByte(rest, '`')
			if j < 0 {
				buf.WriteString(" " + rest)
				continue
			}
			buf.WriteString(" " + rest[:j])
			open.Text = strings.Join(strings.Fields(buf.String()), " ")
			spans = append(spans, *open)
			open = nil
			buf.Reset()
			rest = rest[j+1:]
		}
		for {
			j := strings.IndexByte(rest, '`')
			if j < 0 {
				break
			}
			rest = rest[j+1:]
			k := strings.IndexByte(rest, '`')
			if k < 0 {
				open = &Span{Line: i + 1, Block: block}
				buf.WriteString(rest)
				break
			}
			spans = append(spans, Span{Line: i + 1, Block: block, Text: strings.Join(strings.Fields(rest[:k]), " ")})
			rest = rest[k+1:]
		}
	}
	return spans
}

// ShellLines returns the lines of d's fenced sh blocks.
func ShellLines(d Doc) []ShellLine {
	var out []ShellLine
	in := false
	for i, l := range strings.Split(d.Text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			if in {
				in = false
			} else {
				in = t == "```sh" || t == "```bash" || t == "```shell"
			}
			continue
		}
		if !in {
			continue
		}
		if j := strings.Index(t, "#"); j >= 0 {
			t = strings.TrimSpace(t[:j])
		}
		if t != "" {
			out = append(out, ShellLine{Line: i + 1, Text: t})
		}
	}
	return out
}

// A Command is a make, go test or qsplice command a document names, in a
// span or a shell line, with the flags it names.
type Command struct {
	Doc   string
	Line  int
	Text  string
	Tool  string   // "make", "go", or a binary name
	Flags []string // -name tokens, without the dash or =value
}

var (
	binaryRE = regexp.MustCompile(`^qsplice-[a-z]+(-[a-z]+)*$`)
	flagRE   = regexp.MustCompile(`(?:^|[\s\[(])-([a-z][a-z0-9-]*)`)
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	sectRE   = regexp.MustCompile(`docs/architecture\.md\s+§(\d+)`)
	localRE  = regexp.MustCompile(`(?:^|[^\w/])§(\d+)`)
	// goIdentRE: a package-qualified Go name, `link.DisableOffloads`,
	// `splice/link.Impair`, `wire.IPv4.SetSrc` (the method is not checked).
	goIdentRE = regexp.MustCompile(`^((?:[a-z0-9]+/)*[a-z0-9]+)\.([A-Z]\w*)(?:\.\w+)?(?:\(\))?$`)
)

// Commands returns the commands d names. A span of flags alone (`-workers
// N`) belongs to the binary whose command opens the same block (a list
// item about that binary), if any; elsewhere it is too ambiguous to check.
func Commands(d Doc) []Command {
	var cmds []Command
	lastBin, lastBlock, first := "", -1, false
	for _, s := range Spans(d) {
		first = s.Block != lastBlock
		if first {
			lastBin, lastBlock = "", s.Block
		}
		c, ok := command(d.Path, s.Line, s.Text)
		if ok {
			cmds = append(cmds, c)
			if binaryRE.MatchString(c.Tool) && first {
				lastBin = c.Tool // the block is about this binary
			}
			continue
		}
		if strings.HasPrefix(s.Text, "-") && lastBin != "" {
			cmds = append(cmds, Command{Doc: d.Path, Line: s.Line, Text: lastBin + " " + s.Text, Tool: lastBin, Flags: flagsOf(s.Text)})
		}
	}
	for _, l := range ShellLines(d) {
		for _, part := range strings.Split(l.Text, "&&") {
			if c, ok := command(d.Path, l.Line, strings.TrimSpace(part)); ok {
				cmds = append(cmds, c)
			}
		}
	}
	return cmds
}

func command(doc string, line int, text string) (Command, bool) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return Command{}, false
	}
	c := Command{Doc: doc, Line: line, Text: text, Tool: f[0]}
	switch {
	case f[0] == "make":
	case f[0] == "go" && len(f) > 1 && f[1] == "test":
	case binaryRE.MatchString(f[0]):
		c.Flags = flagsOf(text)
	default:
		return Command{}, false
	}
	return c, true
}

func flagsOf(text string) []string {
	var flags []string
	for _, m := range flagRE.FindAllStringSubmatch(text, -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// MakeTargets returns the targets of a make command ("all" when it names
// none).
func MakeTargets(c Command) []string {
	var t []string
	for _, w := range strings.Fields(c.Text)[1:] {
		if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
			continue
		}
		t = append(t, w)
	}
	if len(t) == 0 {
		t = []string{"all"}
	}
	return t
}

// Subcommands returns the words after a binary's name that may be
// subcommands (lower-case words, alternatives split at '|').
func Subcommands(c Command) []string {
	f := strings.Fields(c.Text)
	if len(f) < 2 {
		return nil
	}
	var subs []string
	for _, w := range strings.Split(f[1], "|") {
		if regexp.MustCompile(`^[a-z]+$`).MatchString(w) {
			subs = append(subs, w)
		}
	}
	return subs
}

// docExts are the file name endings that make a backquoted word a file
// of this repository (output files such as lab.csv are not).
var docExts = []string{".go", ".md", ".yaml", ".env", ".conf", ".service", ".sh"}

func hasDocExt(s string) bool {
	for _, e := range docExts {
		if strings.HasSuffix(s, e) {
			return true
		}
	}
	return false
}

// Check returns every reference of d that does not hold.
func (r *Repo) Check(d Doc) []Problem {
	var ps []Problem
	bad := func(line int, ref, why string) {
		ps = append(ps, Problem{Doc: d.Path, Line: line, Ref: ref, Why: why})
	}
	for _, s := range Spans(d) {
		if c, ok := command(d.Path, s.Line, s.Text); ok && c.Tool != "go" {
			continue // commands are checked below
		}
		for _, w := range strings.Fields(s.Text) {
			if why := r.checkWord(w); why != "" {
				bad(s.Line, w, why)
			}
		}
	}
	for _, c := range Commands(d) {
		for _, why := range r.checkCommand(c) {
			bad(c.Line, c.Text, why)
		}
	}
	lines := strings.Split(d.Text, "\n")
	for i, l := range lines {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			if why := r.checkLink(d.Path, m[1]); why != "" {
				bad(i+1, m[1], why)
			}
		}
		if strings.Contains(l, "../shared") || strings.Contains(l, "design.md") {
			bad(i+1, strings.TrimSpace(l), "names a document outside the repository (use docs/architecture.md)")
		}
		for _, m := range sectRE.FindAllStringSubmatch(l, -1) {
			if why := r.checkSection(m[1]); why != "" {
				bad(i+1, m[0], why)
			}
		}
		if d.Path == "docs/architecture.md" {
			for _, m := range localRE.FindAllStringSubmatch(l, -1) {
				if why := r.checkSection(m[1]); why != "" {
					bad(i+1, "§"+m[1], why)
				}
			}
		}
	}
	return ps
}

// checkWord judges one word of a code span: a test name, a path, a
// binary; anything else (flags, identifiers, metric names) passes.
func (r *Repo) checkWord(w string) string {
	w = strings.TrimRight(w, ".,;:)")
	w = strings.TrimLeft(w, "(")
	switch {
	case w == "":
		return ""
	case strings.HasPrefix(w, "../") || strings.Contains(w, "/shared/"):
		return "leads outside the repository"
	case regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z0-9_]\w*(\*|/\S*)?$`).MatchString(w):
		return r.checkTest(w)
	case binaryRE.MatchString(w):
		if !r.binaries[w] {
			return "no such binary under cmd/"
		}
		return ""
	case goIdentRE.MatchString(w):
		return r.checkIdent(w)
	}
	if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") || strings.Contains(w, "://") ||
		strings.ContainsAny(w, "{}<>|=$%\"'@:[]") || !regexp.MustCompile(`^[A-Za-z0-9_.*/-]+$`).MatchString(w) {
		return ""
	}
	if strings.Contains(w, "*") {
		if !strings.Contains(w, "/") || !r.top[strings.Split(w, "/")[0]] {
			return ""
		}
		m, _ := filepath.Glob(filepath.Join(r.Root, filepath.FromSlash(w)))
		if len(m) == 0 {
			return "matches no file"
		}
		return ""
	}
	p := strings.TrimSuffix(w, "/")
	switch {
	case strings.Contains(p, "/"):
		if r.top[strings.Split(p, "/")[0]] || hasDocExt(p) {
			if !r.paths[p] {
				return "no such file or directory in the repository"
			}
		}
	case hasDocExt(p):
		if !r.bases[p] {
			return "no file of this name in the repository"
		}
	}
	return ""
}

// checkIdent: pkg.Name names a declaration of a package of this
// repository whose path ends in pkg. Packages that are not ours (os,
// unix) pass.
func (r *Repo) checkIdent(w string) string {
	m := goIdentRE.FindStringSubmatch(w)
	pkg, name := m[1], m[2]
	var dirs []string
	for p := range r.paths {
		if (p == pkg || strings.HasSuffix(p, "/"+pkg)) && r.hasGo(p) {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) == 0 {
		if strings.Contains(pkg, "/") {
			return "no such package in the repository"
		}
		return ""
	}
	decl := regexp.MustCompile(`(?m)^(?:func|type|var|const)\s+(?:\([^)]*\)\s*)?` + name + `\b|^\t` + name + `\b[^:]*(?:=|$|\s[A-Za-z*\[])`)
	for _, d := range dirs {
		ents, _ := os.ReadDir(filepath.Join(r.Root, filepath.FromSlash(d)))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(d), e.Name()))
			if err == nil && decl.Match(b) {
				return ""
			}
		}
	}
	return "no declaration " + name + " in package " + strings.Join(dirs, ", ")
}

// hasGo: the directory p holds Go files.
func (r *Repo) hasGo(p string) bool {
	ents, err := os.ReadDir(filepath.Join(r.Root, filepath.FromSlash(p)))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}

func (r *Repo) checkTest(w string) string {
	name, _, _ := strings.Cut(w, "/")
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for t := range r.tests {
			if strings.HasPrefix(t, prefix) {
				return ""
			}
		}
		return "no test function has this prefix"
	}
	if len(r.tests[name]) == 0 {
		return "no such test function"
	}
	return ""
}

func (r *Repo) checkCommand(c Command) []string {
	var why []string
	switch {
	case c.Tool == "make":
		for _, t := range MakeTargets(c) {
			if !r.targets[t] {
				why = append(why, "no Makefile target "+t)
			}
		}
	case c.Tool == "go":
		why = append(why, r.checkGoTest(c)...)
	default:
		if !r.binaries[c.Tool] {
			why = append(why, "no such binary under cmd/")
		}
	}
	return why
}

// checkGoTest: `go test ./pkg ... -run P`: the package exists and P
// matches one of its tests.
func (r *Repo) checkGoTest(c Command) []string {
	f := strings.Fields(c.Text)
	var pkgs []string
	run := ""
	for i := 2; i < len(f); i++ {
		switch {
		case f[i] == "-run" && i+1 < len(f):
			run = f[i+1]
			i++
		case strings.HasPrefix(f[i], "-run="):
			run = strings.TrimPrefix(f[i], "-run=")
		case strings.HasPrefix(f[i], "./"):
			pkgs = append(pkgs, strings.TrimSuffix(strings.TrimPrefix(f[i], "./"), "/..."))
		}
	}
	var why []string
	for _, p := range pkgs {
		if !r.paths[p] {
			why = append(why, "no package "+p)
			continue
		}
		if run == "" {
			continue
		}
		re, err := regexp.Compile(run)
		if err != nil {
			why = append(why, "bad -run pattern: "+err.Error())
			continue
		}
		found := false
		for t, dirs := range r.tests {
			for _, d := range dirs {
				if d == p && re.MatchString(t) {
					found = true
				}
			}
		}
		if !found {
			why = append(why, fmt.Sprintf("-run %s matches no test in %s", run, p))
		}
	}
	return why
}

// checkLink judges a Markdown link target, relative to the document.
func (r *Repo) checkLink(doc, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	p := doc
	if file != "" {
		p = path.Clean(path.Join(path.Dir(doc), file))
		if strings.HasPrefix(p, "../") || p == ".." {
			return "leads outside the repository"
		}
		if !r.paths[strings.TrimSuffix(p, "/")] {
			return "no such file or directory in the repository"
		}
	}
	if anchor != "" && strings.HasSuffix(p, ".md") && !r.anchors[p][anchor] {
		return "no heading with this anchor"
	}
	return ""
}

func (r *Repo) checkSection(n string) string {
	k, _ := strconv.Atoi(n)
	if _, ok := r.sections[k]; !ok {
		return "docs/architecture.md has no section " + n
	}
	return ""
}

// CheckGoComments returns the Go files' references that lead outside the
// repository (design.md, ../shared) or name a docs/architecture.md
// section that does not exist.
func (r *Repo) CheckGoComments() ([]Problem, error) {
	var ps []Problem
	var files []string
	for p := range r.paths {
		// This package's own tests name broken references on purpose.
		if strings.HasSuffix(p, ".go") && !strings.HasPrefix(p, "tools/docs/") {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	for _, p := range files {
		f, err := os.Open(filepath.Join(r.Root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			if strings.Contains(l, "design.md") || strings.Contains(l, "../shared") {
				ps = append(ps, Problem{Doc: p, Line: n, Ref: strings.TrimSpace(l), Why: "names a document outside the repository (use docs/architecture.md)"})
			}
			for _, m := range sectRE.FindAllStringSubmatch(l, -1) {
				if why := r.checkSection(m[1]); why != "" {
					ps = append(ps, Problem{Doc: p, Line: n, Ref: m[0], Why: why})
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// Documents are the documents the checks read, relative to the root.
func (r *Repo) Documents() []string {
	docs := []string{"README.md", "SECURITY.md", "examples/README.md"}
	var more []string
	for p := range r.paths {
		if strings.HasPrefix(p, "docs/") && strings.HasSuffix(p, ".md") {
			more = append(more, p)
		}
	}
	sort.Strings(more)
	var out []string
	for _, d := range append(docs, more...) {
		if r.paths[d] {
			out = append(out, d)
		}
	}
	return out
}
