package calibrate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FormatNumber writes a calibration constant with six significant
// digits, as the YAML configuration reads it.
func FormatNumber(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Snippet is the feedback section's keys for a and b, to paste into the
// front-end's configuration.
func Snippet(a, b float64) string {
	return fmt.Sprintf("feedback:\n  content:\n    a: %s    # s per request: 1/a = %s req/s of empty objects\n    b: %s    # s per byte: 1/b = %s MB/s\n",
		FormatNumber(a), inverse(a, 1), FormatNumber(b), inverse(b, 1e6))
}

func inverse(v, unit float64) string {
	if v == 0 {
		return "unbounded"
	}
	return strconv.FormatFloat(1/v/unit, 'f', 1, 64)
}

// line is one line of a YAML text with its indentation and key.
type line struct {
	text   string
	indent int
	key    string // "" for blank lines, comments and list items
}

func parseLine(s string) line {
	trimmed := strings.TrimLeft(s, " ")
	l := line{text: s, indent: len(s) - len(trimmed)}
	if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '-' {
		return l
	}
	if k, _, ok := strings.Cut(trimmed, ":"); ok {
		l.key = strings.TrimSpace(k)
	}
	return l
}

// RewriteConfig returns the front-end configuration text with a and b set
// in feedback.content, every other line (comments included) as it was:
// the values of existing a: and b: lines are replaced, keeping their
// comments; missing keys or sections are added. It works on block-style
// YAML (as the examples are written) and refuses a content section in
// flow style ({...}), which it cannot edit without losing comments.
func RewriteConfig(text string, a, b float64) (string, error) {
	out, err := rewriteLines(text, a, b)
	if err != nil {
		return "", err
	}
	// The edit works on lines, not on YAML: read the result back, and
	// refuse it unless it says what was meant (odd but valid YAML, such
	// as tags or anchors on the keys, ends here rather than in a file
	// the front-end reads otherwise).
	var doc struct {
		Feedback struct {
			Content struct {
				A, B *float64
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		return "", fmt.Errorf("calibrate: the file rewritten does not read back (%v): set a and b by hand", err)
	}
	if c := doc.Feedback.Content; c.A == nil || c.B == nil || *c.A != mustParse(FormatNumber(a)) || *c.B != mustParse(FormatNumber(b)) {
		return "", errors.New("calibrate: could not place a and b in the file's feedback.content: set them by hand")
	}
	return out, nil
}

func mustParse(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func rewriteLines(text string, a, b float64) (string, error) {
	lines := strings.Split(text, "\n")
	parsed := make([]line, len(lines))
	for i, s := range lines {
		parsed[i] = parseLine(s)
	}
	// block returns the end (exclusive) of the block of the key at i:
	// the lines after it indented deeper, blank lines and comments.
	block := func(i int) int {
		j := i + 1
		for ; j < len(parsed); j++ {
			if p := parsed[j]; p.key != "" || strings.HasPrefix(strings.TrimSpace(p.text), "-") {
				if p.indent <= parsed[i].indent {
					break
				}
			}
		}
		// Trailing blank lines and comments belong to what follows.
		for j > i+1 && strings.TrimSpace(lines[j-1]) == "" {
			j--
		}
		return j
	}
	find := func(from, to, indent int, key string) int {
		for i := from; i < to; i++ {
			if parsed[i].key == key && parsed[i].indent == indent {
				return i
			}
		}
		return -1
	}
	childIndent := func(i, end, def int) int {
		for j := i + 1; j < end; j++ {
			if parsed[j].key != "" {
				return parsed[j].indent
			}
		}
		return def
	}
	for i, p := range parsed {
		if p.key != "" || strings.HasPrefix(strings.TrimSpace(p.text), "-") {
			if p.indent != 0 {
				return "", fmt.Errorf("calibrate: line %d: the top-level keys must start in the first column", i+1)
			}
			break
		}
	}
	fb := find(0, len(parsed), 0, "feedback")
	if fb < 0 {
		out := strings.TrimRight(text, "\n") + "\n\n" + Snippet(a, b)
		return out, nil
	}
	if rest := afterColon(lines[fb]); rest != "" {
		return "", fmt.Errorf("calibrate: line %d: feedback is not a block mapping (%q): set a and b by hand", fb+1, rest)
	}
	fbEnd := block(fb)
	ci := childIndent(fb, fbEnd, 2)
	ct := find(fb+1, fbEnd, ci, "content")
	var insert []string
	at := 0
	if ct < 0 {
		pad := strings.Repeat(" ", ci)
		insert = []string{pad + "content:", pad + pad + "a: " + FormatNumber(a), pad + pad + "b: " + FormatNumber(b)}
		at = fbEnd
	} else {
		if rest := afterColon(lines[ct]); rest != "" {
			return "", fmt.Errorf("calibrate: line %d: feedback.content is in flow style (%q): set a and b by hand", ct+1, rest)
		}
		ctEnd := block(ct)
		ki := childIndent(ct, ctEnd, parsed[ct].indent+2)
		at = ct + 1
		for _, kv := range []struct {
			key string
			v   float64
		}{{"a", a}, {"b", b}} {
			if i := find(ct+1, ctEnd, ki, kv.key); i >= 0 {
				lines[i] = setValue(lines[i], FormatNumber(kv.v))
			} else {
				insert = append(insert, strings.Repeat(" ", ki)+kv.key+": "+FormatNumber(kv.v))
			}
		}
	}
	out := append(append(append([]string{}, lines[:at]...), insert...), lines[at:]...)
	return strings.Join(out, "\n"), nil
}

// afterColon is what follows "key:" on a line, its comment removed.
func afterColon(s string) string {
	_, v, _ := strings.Cut(s, ":")
	if i := strings.Index(v, "#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// setValue replaces the value of "key: value  # comment", keeping the
// indentation and the comment.
func setValue(s, value string) string {
	k, v, _ := strings.Cut(s, ":")
	comment := ""
	if i := strings.Index(v, "#"); i >= 0 {
		comment = v[i:]
		// Keep the comment's column when the new value fits.
		width := i - 1
		pad := max(width-len(value), 1)
		return k + ": " + value + strings.Repeat(" ", pad) + comment
	}
	return k + ": " + value
}
