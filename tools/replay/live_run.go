package replay

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// LiveOptions say how a capture is played.
type LiveOptions struct {
	// Servers maps each captured server to where its connections go now
	// (MapServers).
	Servers map[netip.AddrPort]netip.AddrPort
	// Speed scales the capture's timing: 2 plays twice as fast; 0 sends
	// each connection as soon as the one before it has started, and each
	// request as soon as the response before it is in.
	Speed float64
	// CheckBody compares each response's body with the captured one's
	// SHA-256 where the capture holds it (off for servers whose content
	// differs per back-end, as the lab's does).
	CheckBody bool
	Timeout   time.Duration // each request's; 0: 30 s
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
}

// LiveResult is what one exchange got.
type LiveResult struct {
	Conn, Index int
	Target      string
	Want, Got   int   // status
	WantLen     int64 // captured body length
	GotLen      int64
	Verdict     string // "ok", "status", "length", "body", "error: ..."
	Duration    time.Duration
}

// LiveSummary totals a live replay, in the manner of tcpreplay's.
type LiveSummary struct {
	Connections, Requests     int
	OK, WrongStatus, WrongLen int
	WrongBody, Failed         int
	SentBytes, RecvBytes      int64
	Elapsed, CaptureSpan      time.Duration
	Results                   []LiveResult
}

// Correct: every response matched.
func (s LiveSummary) Correct() bool { return s.OK == s.Requests && s.Requests > 0 }

// String is the summary a person reads.
func (s LiveSummary) String() string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.RecvBytes) / s.Elapsed.Seconds() / 1e6
	}
	return fmt.Sprintf("live replay: %d connections, %d requests in %.3f s (the capture spans %.3f s)\n"+
		"  responses: %d correct, %d wrong status, %d wrong length, %d wrong body, %d failed\n"+
		"  sent %d bytes, received %d bytes (%.2f MB/s)\n",
		s.Connections, s.Requests, s.Elapsed.Seconds(), s.CaptureSpan.Seconds(),
		s.OK, s.WrongStatus, s.WrongLen, s.WrongBody, s.Failed, s.SentBytes, s.RecvBytes, rate)
}

// RunLive plays conns: each connection dialled at its captured start
// (scaled by Speed), each request sent at its captured time or once the
// response before it is in, whichever is later, with real sockets.
func RunLive(ctx context.Context, conns []LiveConn, o LiveOptions) LiveSummary {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	scale := func(d time.Duration) time.Duration {
		if o.Speed <= 0 {
			return 0
		}
		return time.Duration(float64(d) / o.Speed)
	}
	var mu sync.Mutex
	var s LiveSummary
	s.Connections = len(conns)
	start := time.Now()
	var wg sync.WaitGroup
	for ci, c := range conns {
		s.Requests += len(c.Exchanges)
		if last := c.Start + c.Exchanges[len(c.Exchanges)-1].At; last > s.CaptureSpan {
			s.CaptureSpan = last
		}
		wait := time.Until(start.Add(scale(c.Start)))
		select {
		case <-ctx.Done():
		case <-time.After(wait): // the capture's timing, the point of a replay
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, sent, recv := playConn(ctx, ci, c, o, scale)
			mu.Lock()
			defer mu.Unlock()
			s.SentBytes += sent
			s.RecvBytes += recv
			s.Results = append(s.Results, rs...)
		}()
	}
	wg.Wait()
	s.Elapsed = time.Since(start)
	for _, r := range s.Results {
		switch {
		case r.Verdict == "ok":
			s.OK++
		case r.Verdict == "status":
			s.WrongStatus++
		case r.Verdict == "length":
			s.WrongLen++
		case r.Verdict == "body":
			s.WrongBody++
		default:
			s.Failed++
		}
	}
	// Requests never sent (their connection failed first) count as failed.
	if missing := s.Requests - len(s.Results); missing > 0 {
		s.Failed += missing
	}
	return s
}

// playConn plays one connection and returns its results and byte counts.
func playConn(ctx context.Context, ci int, c LiveConn, o LiveOptions, scale func(time.Duration) time.Duration) ([]LiveResult, int64, int64) {
	var out []LiveResult
	fail := func(i int, err error) {
		for ; i < len(c.Exchanges); i++ {
			out = append(out, LiveResult{Conn: ci, Index: i, Target: c.Exchanges[i].Target, Want: c.Exchanges[i].Status, Verdict: "error: " + err.Error()})
			err = fmt.Errorf("connection failed earlier")
		}
	}
	to := o.Servers[c.Server]
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	nc, err := o.Dial(dctx, "tcp4", to.String())
	cancel()
	if err != nil {
		fail(0, err)
		return out, 0, 0
	}
	defer nc.Close()
	conn := &countingConn{Conn: nc}
	br := bufio.NewReader(conn)
	began := time.Now()
	for i, ex := range c.Exchanges {
		if d := time.Until(began.Add(scale(ex.At))); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d): // the request's captured moment
			}
		}
		nc.SetDeadline(time.Now().Add(o.Timeout))
		t0 := time.Now()
		if _, err := conn.Write(ex.Request); err != nil {
			fail(i, err)
			break
		}
		req, _ := http.NewRequest(ex.Method, "http://x"+ex.Target, nil)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			fail(i, err)
			break
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		r := LiveResult{Conn: ci, Index: i, Target: ex.Target, Want: ex.Status, Got: resp.StatusCode,
			WantLen: ex.BodyLen, GotLen: n, Duration: time.Since(t0), Verdict: "ok"}
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		switch {
		case err != nil:
			r.Verdict = "error: body: " + err.Error()
		case ex.Status != 0 && resp.StatusCode != ex.Status:
			r.Verdict = "status"
		case ex.Status != 0 && n != ex.BodyLen:
			r.Verdict = "length"
		case o.CheckBody && ex.HaveSHA && sum != ex.BodySHA:
			r.Verdict = "body"
		}
		out = append(out, r)
		if err != nil || resp.Close {
			if i+1 < len(c.Exchanges) {
				fail(i+1, fmt.Errorf("the server closed the connection after request %d", i+1))
			}
			break
		}
	}
	return out, conn.sent, conn.recv
}

// countingConn counts the bytes a connection moved.
type countingConn struct {
	net.Conn
	sent, recv int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.recv += int64(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent += int64(n)
	return n, err
}
