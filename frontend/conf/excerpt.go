package conf

import (
	"strings"
	"unicode/utf8"
)

// Errors quote what the file says, but only a short excerpt of it: a
// value or key of kilobytes (a pasted blob, a binary file read as YAML)
// would otherwise come back whole in the error, and in the journal.

// maxQuoted is the most bytes of a file's text an error quotes.
const maxQuoted = 48

// excerpt is s, or its first maxQuoted bytes (whole runes) and "...".
func excerpt(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// excerptArgs shortens the string arguments format quotes with %q: in
// this package's messages those are the file's text (keys, values), and
// %s the package's own (paths, lists of known keys).
func excerptArgs(format string, args []any) []any {
	n := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
			i++ // flags, width, precision
		}
		if i >= len(format) || format[i] == '%' {
			continue
		}
		if n < len(args) && format[i] == 'q' {
			if s, ok := args[n].(string); ok {
				args[n] = excerpt(s)
			}
		}
		n++
	}
	return args
}
