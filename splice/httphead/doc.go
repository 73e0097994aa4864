// Package httphead parses the head of an HTTP/1.0 or HTTP/1.1 request: the
// request line and the header fields up to the empty line.
//
// Place in the data flow: the front-end's client-facing TCP endpoint buffers
// the bytes a client sends on a new connection and calls Parse on that
// buffer each time more arrive. ErrIncomplete means keep buffering;
// ErrTooLarge means answer 431; a *SyntaxError means answer 400. Once Parse
// succeeds, the scheduler classifies the request by Host, Path and Cookie,
// and the handoff replays exactly HeadLen bytes (plus BodyLen bytes of body,
// when known) to the chosen back-end.
//
// The parser is strict on purpose. The front-end routes on what it parsed
// while the back-end's web server acts on what it parses itself, so any
// input the two could read differently is refused rather than guessed at:
// bare LF line endings, bare CR, obsolete line folding, whitespace before
// a colon, several Host fields, Content-Length together with
// Transfer-Encoding, conflicting or non-numeric Content-Length values,
// Transfer-Encoding whose last coding is not chunked, and Transfer-Encoding
// in an HTTP/1.0 request are all syntax errors.
//
// Every decision depends only on the bytes before the point it is taken,
// so a prefix of a buffer never parses to a different outcome than the
// whole buffer: a prefix gives ErrIncomplete, or the same error at the same
// offset, or (when it already holds the whole head) the same Request. This
// is also what lets Parse reject junk early, before the head is complete,
// so a client cannot hold a buffer slot by trickling garbage.
//
// Parse does not allocate when it succeeds or needs more bytes: every
// []byte in Request is a sub-slice of the input, which is never modified.
package httphead
