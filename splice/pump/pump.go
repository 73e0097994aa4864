// Package pump moves frames from a blocking link.Link into a daemon's
// event loop: the fallback for links that are not a link.BatchLink (the
// portable water TAP, a capture Recorder, the in-memory pair of tests).
// A BatchLink is read by the loop itself, without this hand-off. The
// engines are single-threaded and sans-I/O; a daemon runs one reader
// goroutine per such link (this package) and one loop goroutine that owns
// the engine, writes its output and runs its timers.
//
// Buffers circulate between the reader and the loop through two channels,
// so the steady state allocates nothing: the loop hands each frame back
// with Release once the engine's output for it has been written.
package pump

import (
	"sync"
	"time"

	"github.com/qsplice/qsplice/splice/link"
)

// Frame is one received frame and when it was read.
type Frame struct {
	Data []byte // the frame (a prefix of the buffer)
	At   time.Time
	Port uint8 // caller-chosen tag saying which link it came from
	buf  []byte
	home *Pump
}

// Pump reads frames from a link into pooled buffers.
type Pump struct {
	C      <-chan *Frame
	c      chan *Frame
	free   chan *Frame
	l      link.Link
	port   uint8
	notify func()

	mu  sync.Mutex
	err error
}

// Start begins reading l with n buffers of size bytes (size should exceed
// the link MTU plus the Ethernet header). Frames are sent on C; C closes
// when the link fails or is closed, and Err says why. notify, when not
// nil, is called after each frame is queued and when C closes: a loop
// that sleeps in a link.Poller passes its Wake.
func Start(l link.Link, port uint8, n, size int, notify func()) *Pump {
	if notify == nil {
		notify = func() {}
	}
	p := &Pump{c: make(chan *Frame, n), free: make(chan *Frame, n), l: l, port: port, notify: notify}
	p.C = p.c
	for i := 0; i < n; i++ {
		p.free <- &Frame{buf: make([]byte, size), home: p, Port: port}
	}
	go p.run()
	return p
}

func (p *Pump) run() {
	defer p.notify()
	defer close(p.c)
	for {
		f := <-p.free
		n, err := p.l.ReadFrame(f.buf)
		if err != nil {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
			return
		}
		f.Data = f.buf[:n]
		f.At = time.Now()
		p.c <- f
		p.notify()
	}
}

// Release returns a frame's buffer to its pump.
func (f *Frame) Release() { f.home.free <- f }

// Err is the error that stopped the reader, if any.
func (p *Pump) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
