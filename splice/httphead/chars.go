package httphead

// Byte classes from RFC 9110 and RFC 3986, as lookup tables so the scanner
// spends one load per byte.
var (
	// tokenChar: tchar, the characters of methods and field names.
	tokenChar [256]bool
	// targetChar: visible US-ASCII but '#', what a request-target may hold
	// (a fragment is never sent). Bytes above 0x7e are refused: clients
	// percent-encode them, and raw ones are read differently by different
	// servers.
	targetChar [256]bool
	// valueChar: field-vchar, SP and HTAB; obs-text (0x80-0xff) is allowed
	// in values for compatibility, CTLs other than HTAB are not.
	valueChar [256]bool
	// hostChar: reg-name and IPv4 characters (unreserved, sub-delims and
	// '%' for percent-encoding). Notably absent: '@', '/', '?', '#', space.
	hostChar [256]bool
	// ipLiteralChar: what may sit between '[' and ']' (IPv6, IPvFuture).
	ipLiteralChar [256]bool
)

func init() {
	for c := 0; c < 256; c++ {
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		tokenChar[c] = alnum || c < 0x80 && contains("!#$%&'*+-.^_`|~", byte(c))
		targetChar[c] = c > 0x20 && c < 0x7f && c != '#'
		valueChar[c] = c == '\t' || c >= 0x20 && c != 0x7f
		hostChar[c] = alnum || c < 0x80 && contains("-._~!$&'()*+,;=%", byte(c))
		ipLiteralChar[c] = hostChar[c] || c == ':'
	}
}

func contains(set string, c byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}

// equalFoldLower reports whether b equals lower, ignoring ASCII case in b.
// lower must already be lower case. Unlike bytes.EqualFold with a converted
// string it cannot allocate, and it does no Unicode folding, which HTTP
// field names and codings do not want.
func equalFoldLower(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// hasPrefixFoldLower is equalFoldLower on the first len(lower) bytes of b.
func hasPrefixFoldLower(b []byte, lower string) bool {
	return len(b) >= len(lower) && equalFoldLower(b[:len(lower)], lower)
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// trimOWS cuts optional whitespace from both ends of b.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && isOWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isOWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// nextListElement splits the first element off a comma-separated field
// value (RFC 9110 5.6.1), trimmed of whitespace. Empty elements come back
// empty; callers skip them as the RFC asks.
func nextListElement(list []byte) (elem, rest []byte) {
	for i := 0; i < len(list); i++ {
		if list[i] == ',' {
			return trimOWS(list[:i]), list[i+1:]
		}
	}
	return trimOWS(list), nil
}
