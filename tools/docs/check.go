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
	binaryRE     = regexp.MustCompile(`^qsplice-[a-z]+(-[a-z]+)*$`)
	flagRE       = regexp.MustCompile(`(?:^|[\s\[(])-([a-z][a-z0-9-]*)`)
	quotedRE     = regexp.MustCompile(`"[^"]*"|'[^']*'`) // a quoted shell word
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	sectRE       = regexp.MustCompile(`docs/architecture\.md\s+§(\d+)`)
	localRE      = regexp.MustCompile(`(?:^|[^\w/])§(\d+)`)
	// testRefRE: a test named in a document, possibly as a prefix
	// (TestAdversarial*) or with a subtest (TestX/case).
	testRefRE = regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z0-9_]\w*(\*|/\S*)?$`)
	// pathWordRE: the characters of a path worth checking.
	pathWordRE = regexp.MustCompile(`^[A-Za-z0-9_.*/-]+$`)
	// subcommandRE: a word after a binary's name that may be a subcommand.
	subcommandRE = regexp.MustCompile(`^[a-z]+$`)
	// testNameRE: a test, fuzz or benchmark function's name.
	testNameRE = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)
	// goIdentRE: a package-qualified Go name, `link.DisableOffloads`,
	// `splice/link.Impair`, `wire.IPv4.SetSrc` (the method is not checked).
	goIdentRE = regexp.MustCompile(`^((?:[a-z0-9]+/)*[a-z0-9]+)\.([A-Z]\w*)(?:\.\w+)?(?:\(\))?$`)
)

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
	case testRefRE.MatchString(w):
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
		strings.ContainsAny(w, "{}<>|=$%\"'@:[]") || !pathWordRE.MatchString(w) {
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

// CheckGoComments returns the Go files' comments that lead outside the
// repository (design.md, ../shared), name a docs/architecture.md section
// that does not exist, or name a test function that does not exist (a
// test renamed without its mentions). A Test-like name that code uses
// (a field such as lab.Config.TestServerArgs) is not a test reference; a
// prefix of test names (TestAdversarial, "the TestAdversarial tests")
// passes.
func (r *Repo) CheckGoComments() ([]Problem, error) {
	type mention struct {
		file string
		line int
		name string
	}
	var ps []Problem
	var mentions []mention
	inCode := map[string]bool{}
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
			code, comment, _ := strings.Cut(l, "//")
			for _, m := range testNameRE.FindAllString(code, -1) {
				inCode[m] = true
			}
			for _, m := range testNameRE.FindAllString(comment, -1) {
				mentions = append(mentions, mention{p, n, m})
			}
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
	for _, m := range mentions {
		if inCode[m.name] || r.checkTest(m.name+"*") == "" {
			continue
		}
		ps = append(ps, Problem{Doc: m.file, Line: m.line, Ref: m.name, Why: "no such test function"})
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
