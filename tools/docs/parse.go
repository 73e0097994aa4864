package docs

import (
	"strings"
)

// Reading a Markdown document: its code spans, the lines of its shell
// blocks, and the commands they name.

// A Doc is one document: its repository path and its text.
type Doc struct {
	Path string // relative to the repository root, slash-separated
	Text string
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

// flagsOf returns the flags text passes to its binary: not those inside
// quotes (the value of a flag such as -frontend-args "-timeline F"), nor
// those after " -- " (another program's, as in qsplice-lab exec c1 --
// wrk -c16).
func flagsOf(text string) []string {
	if i := strings.Index(text, " -- "); i >= 0 {
		text = text[:i]
	}
	text = quotedRE.ReplaceAllString(text, `""`)
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
		if subcommandRE.MatchString(w) {
			subs = append(subs, w)
		}
	}
	return subs
}
