package httphead

import "bytes"

// Connection options for a handoff connection kept alive between client
// connections (splice/fe_pool.go). A client that sends "Connection:
// close" would have the server close the handoff connection after the
// response; the front-end blanks the option in the request it hands
// over, and the shim writes "close" into the response's "Connection:
// keep-alive", so that the client still sees the close it asked for.
// Both edits keep every byte count: no sequence number moves.

// BlankClose overwrites with spaces every "close" option of the
// Connection fields in the request head at the start of b (complete
// field lines only, up to the empty line that ends the head), and
// reports how many it blanked. The field stays, with an empty element
// where the option was (RFC 9110 5.6.1: recipients accept empty list
// elements); an HTTP/1.1 server then keeps the connection open.
func BlankClose(b []byte) int {
	n := 0
	eachField(b, true, func(name []byte, value []byte) bool {
		if !equalFoldLower(name, "connection") {
			return true
		}
		for off := 0; off < len(value); {
			end := bytes.IndexByte(value[off:], ',')
			if end < 0 {
				end = len(value)
			} else {
				end += off
			}
			elem := value[off:end]
			lo, hi := 0, len(elem)
			for lo < hi && isOWS(elem[lo]) {
				lo++
			}
			for hi > lo && isOWS(elem[hi-1]) {
				hi--
			}
			if equalFoldLower(elem[lo:hi], "close") {
				for i := lo; i < hi; i++ {
					elem[i] = ' '
				}
				n++
			}
			off = end + 1
		}
		return true
	})
	return n
}

// CloseKeepAlive rewrites the value of a "Connection: keep-alive" field
// in the response head at the start of b to "close" padded with spaces
// (trailing whitespace is not part of a field value, RFC 9112 5), and
// reports whether it did. Only a field whose value is that one option,
// on a complete line within b, is rewritten: the head of a response is
// in its first segment.
func CloseKeepAlive(b []byte) bool {
	done := false
	eachField(b, false, func(name []byte, value []byte) bool {
		if !equalFoldLower(name, "connection") {
			return true
		}
		v := trimOWS(value)
		if !equalFoldLower(v, "keep-alive") {
			return true
		}
		copy(v, "close     ")
		done = true
		return false
	})
	return done
}

// eachField calls f with the name and the raw value (between the colon
// and the CRLF, aliasing b) of each complete field line of the head at
// the start of b, after its first line, until the empty line, the end
// of b, or f returns false. A request head may start with empty lines
// (skipEmpty), which Parse allows too.
func eachField(b []byte, skipEmpty bool, f func(name, value []byte) bool) {
	off := 0
	for skipEmpty && bytes.HasPrefix(b[off:], []byte("\r\n")) {
		off += 2
	}
	nl := bytes.Index(b[off:], []byte("\r\n"))
	if nl < 0 {
		return
	}
	for off += nl + 2; off < len(b); {
		n := bytes.Index(b[off:], []byte("\r\n"))
		if n <= 0 {
			return // the empty line, or no complete line
		}
		name, value, ok := bytes.Cut(b[off:off+n], []byte(":"))
		if ok && !f(name, value) {
			return
		}
		off += n + 2
	}
}
