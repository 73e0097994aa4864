package loadgen

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"
)

// statusClass is what the experiments distinguish among HTTP answers:
// served, refused by the front-end's rate control (429), refused for lack
// of capacity (503), anything else.
type statusClass int

const (
	class2xx statusClass = iota
	class429
	class503
	classOther
	numClasses
)

func classify(status int) statusClass {
	switch {
	case status >= 200 && status < 300:
		return class2xx
	case status == http.StatusTooManyRequests:
		return class429
	case status == http.StatusServiceUnavailable:
		return class503
	}
	return classOther
}

// errorKind says why a request got no complete answer.
type errorKind int

const (
	errTimeout errorKind = iota // the per-request timeout fired
	errRefused                  // connect refused (RST to the SYN)
	errReset                    // connection reset or closed before the answer ended
	errOther
	numErrorKinds
)

func kindOf(err error) errorKind {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errPoolTimeout) ||
		errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case isClosed(err):
		return errReset
	}
	return errOther
}

// isClosed reports errors that mean the peer reset or closed the connection.
func isClosed(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// errPoolTimeout: every pooled connection stayed busy until the deadline.
var errPoolTimeout = errors.New("timed out waiting for a pooled connection")

// outcome is what one request came to.
type outcome struct {
	err        bool
	kind       errorKind   // when err
	class      statusClass // when !err
	retryAfter bool        // the answer carried Retry-After
	session    sessionKind // whether the request started a session
	tree       int         // X-Content-Tree of the answer; 0: none
	bodyBytes  int64
	// connAt is when the request had a connection to go out on; zero if
	// it never got one (refused, or timed out connecting or queued).
	connAt time.Time
	doneAt time.Time // when the answer was complete or the request failed
}

// conn is one client connection with its read buffer.
type conn struct {
	net.Conn
	br *bufio.Reader
}

// client sends one stream's requests. With a pool it keeps at most
// poolSize connections, each carrying one request at a time; requests
// beyond that wait for one, and the wait counts in their latency. Without
// a pool each request has its own connection, asks the server to close it
// and waits for the server's FIN before closing, so that TIME_WAIT stays
// on the server and the client namespace does not run out of ports at
// thousands of connections per second.
type client struct {
	addr     string // host:port to dial
	request  []byte // the whole GET request, prebuilt
	timeout  time.Duration
	poolSize int
	slots    chan struct{} // a token per busy pooled connection
	idle     chan *conn    // pooled connections waiting for a request
	// requests, when set, are sent in turn instead of request (a
	// stream's cookies, cookies.go).
	requests [][]byte
	ring     requestRing
	sources  *sourceRing // local addresses in turn (sources.go); nil: any
}

func newClient(target string, st Stream, poolSize int, timeout time.Duration) *client {
	u, _ := url.Parse(target) // validated in Config.withDefaults
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	host := st.Host
	if host == "" {
		host = u.Host
	}
	req := "GET " + st.Path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: qsplice-load\r\n"
	if poolSize == 0 {
		req += "Connection: close\r\n"
	}
	c := &client{addr: addr, request: []byte(req + "\r\n"), timeout: timeout, poolSize: poolSize}
	if poolSize > 0 {
		c.slots = make(chan struct{}, poolSize)
		c.idle = make(chan *conn, poolSize)
	}
	return c
}

// do sends one GET and reads the whole answer: completion is its last byte.
func (c *client) do() (o outcome) {
	defer func() {
		if o.doneAt.IsZero() {
			o.doneAt = time.Now()
		}
	}()
	deadline := time.Now().Add(c.timeout)
	req, session := c.ring.pick(c.requests, c.request)
	defer func() { o.session = session }()
	if c.poolSize == 0 {
		return c.doOnce(req, deadline)
	}
	if err := c.acquireSlot(deadline); err != nil {
		return outcome{err: true, kind: kindOf(err)}
	}
	defer func() { <-c.slots }()
	var cn *conn
	select {
	case cn = <-c.idle:
	default:
	}
	o, retry := c.doPooled(cn, req, deadline)
	if retry {
		// The server had closed the idle connection before our request
		// reached it (keep-alive timeout): nothing was answered, so send
		// again on a new connection, as browsers and net/http do.
		o, _ = c.doPooled(nil, req, deadline)
	}
	return o
}

// acquireSlot waits for a free place in the pool until deadline.
func (c *client) acquireSlot(deadline time.Time) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-timer.C:
		return errPoolTimeout
	}
}

// doPooled runs one request on cn, or on a new connection when cn is nil,
// and returns the connection to the pool if it can carry another. retry
// says a reused connection failed before any byte of an answer came back.
func (c *client) doPooled(cn *conn, req []byte, deadline time.Time) (o outcome, retry bool) {
	reused := cn != nil
	if !reused {
		var err error
		if cn, err = c.dial(deadline); err != nil {
			return outcome{err: true, kind: kindOf(err)}, false
		}
	}
	o.connAt = time.Now()
	resp, started, err := c.exchange(cn, req, deadline)
	if err != nil {
		cn.Close()
		if reused && !started && isClosed(err) {
			return outcome{}, true
		}
		o.err, o.kind, o.bodyBytes = true, kindOf(err), resp.bodyBytes
		return o, false
	}
	if resp.reusable {
		c.idle <- cn // never blocks: at most poolSize connections exist
	} else {
		cn.Close()
	}
	return o.answered(resp), false
}

// newPageClient returns a client for one request of a session: its own
// connection, closed after the answer or when deadline passes. method ""
// is GET; a body is sent with its Content-Length.
func newPageClient(target, host, method, path, body string) *client {
	u, _ := url.Parse(target) // validated by the caller's configuration
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	if host == "" {
		host = u.Host
	}
	if method == "" {
		method = "GET"
	}
	req := method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: qsplice-load\r\nConnection: close\r\n"
	if body != "" {
		req += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	return &client{addr: addr, request: []byte(req + "\r\n" + body)}
}

// doUntil sends the client's request on a connection of its own and waits
// for the answer until deadline; a request not answered by then is given
// up and its connection closed.
func (c *client) doUntil(deadline time.Time) outcome {
	o := c.doOnce(c.request, deadline)
	if o.doneAt.IsZero() {
		o.doneAt = time.Now()
	}
	return o
}

// doOnce runs one request on a connection of its own.
func (c *client) doOnce(req []byte, deadline time.Time) (o outcome) {
	cn, err := c.dial(deadline)
	if err != nil {
		return outcome{err: true, kind: kindOf(err)}
	}
	o.connAt = time.Now()
	resp, _, err := c.exchange(cn, req, deadline)
	if err != nil {
		cn.Close()
		o.err, o.kind, o.bodyBytes = true, kindOf(err), resp.bodyBytes
		return o
	}
	o = o.answered(resp)
	o.doneAt = time.Now()
	// The answer is complete and timed. Wait briefly for the server's FIN
	// so that it, not us, closes first.
	cn.SetReadDeadline(time.Now().Add(min(time.Until(deadline), 100*time.Millisecond)))
	cn.br.Discard(1)
	cn.Close()
	return o
}

func (c *client) dial(deadline time.Time) (*conn, error) {
	d := net.Dialer{Deadline: deadline, KeepAlive: -1}
	if a := c.sources.next(); a != nil {
		d.LocalAddr = a
	}
	nc, err := d.Dial("tcp", c.addr)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: nc, br: bufio.NewReaderSize(nc, 16<<10)}, nil
}

// exchange writes the request and reads the answer, all before deadline.
func (c *client) exchange(cn *conn, req []byte, deadline time.Time) (response, bool, error) {
	if err := cn.SetDeadline(deadline); err != nil {
		return response{}, false, err
	}
	if _, err := cn.Write(req); err != nil {
		return response{}, false, err
	}
	return readResponse(cn.br)
}

func (o outcome) answered(r response) outcome {
	o.class, o.retryAfter, o.bodyBytes, o.tree = classify(r.status), r.retryAfter, r.bodyBytes, r.tree
	return o
}

// close closes the idle pooled connections once no request is running.
func (c *client) close() {
	for c.idle != nil {
		select {
		case cn := <-c.idle:
			cn.Close()
		default:
			return
		}
	}
}
