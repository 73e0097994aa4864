package session

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// WriteWsesslog writes sessions in the format ReadWsesslog reads and
// httperf --wsesslog accepts: one request per line, bursts indented by a
// tab, a blank line after each session. Attributes are written only when
// set (a zero Think is left to httperf's default). It refuses what the
// format cannot carry: an empty session, a session opening with a burst,
// a path not starting with "/" or containing white space, a negative
// Think.
func WriteWsesslog(w io.Writer, sessions []LogSession) error {
	bw := bufio.NewWriter(w)
	for si, s := range sessions {
		if len(s.Requests) == 0 {
			return fmt.Errorf("session: WriteWsesslog: session %d is empty", si)
		}
		for ri, r := range s.Requests {
			if err := checkWritable(r, ri == 0); err != nil {
				return fmt.Errorf("session: WriteWsesslog: session %d request %d: %w", si, ri, err)
			}
			if r.Burst {
				bw.WriteByte('\t')
			}
			bw.WriteString(r.Path)
			if r.Method != "" {
				bw.WriteString(" method=" + formatValue(r.Method))
			}
			if r.Contents != "" {
				bw.WriteString(" contents=" + formatValue(r.Contents))
			}
			if r.Think > 0 {
				bw.WriteString(" think=" + formatSeconds(r.Think))
			}
			bw.WriteByte('\n')
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// checkWritable rejects a request the file format cannot represent.
func checkWritable(r LogRequest, first bool) error {
	switch {
	case first && r.Burst:
		return fmt.Errorf("a session cannot open with a burst request")
	case !strings.HasPrefix(r.Path, "/"):
		return fmt.Errorf("path %q does not start with /", r.Path)
	case strings.ContainsAny(r.Path, separators+"\n"):
		return fmt.Errorf("path %q contains white space", r.Path)
	case r.Think < 0:
		return fmt.Errorf("negative think time %v", r.Think)
	}
	return nil
}

// formatValue writes an attribute value bare when it reads back as
// itself, and double-quoted with backslash escapes otherwise.
func formatValue(v string) string {
	if !strings.ContainsAny(v, separators+"\n\\'\"") {
		return v
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(v) {
		switch c := v[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// formatSeconds writes d as decimal seconds, exact to the nanosecond and
// without trailing zeros ("2", "0.25", "1.000000001").
func formatSeconds(d time.Duration) string {
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	s := strconv.FormatInt(secs, 10)
	if nanos == 0 {
		return s
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", nanos), "0")
	return s + "." + frac
}

// Generate draws n sessions from the model as --wsesslog sessions, one
// page line per visit with its path and a think time drawn from the model
// (none after the last page). Timeouts are not modelled here: httperf
// applies its own --timeout. The same rng state gives the same sessions.
func Generate(m *Model, rng *rand.Rand, n int) []LogSession {
	out := make([]LogSession, 0, n)
	for range n {
		s := NewSession(m, rng)
		var reqs []LogRequest
		for page, ok := s.Next(); ok; page, ok = s.Next() {
			if len(reqs) > 0 {
				reqs[len(reqs)-1].Think = s.Think()
			}
			reqs = append(reqs, LogRequest{Path: page.Path()})
		}
		out = append(out, LogSession{Requests: reqs})
	}
	return out
}
