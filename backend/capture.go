package backend

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/qsplice/qsplice/splice/link"
)

// capture records the wire side (every frame read from and written to the
// wire sockets, super-frames whole) to a pcap file. The workers share it
// under a lock: a debugging aid, not the fast path.
type capture struct {
	mu  sync.Mutex
	f   *os.File
	buf *bufio.Writer
	pw  *link.PcapWriter
	err error
}

func openCapture(path string) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	c := &capture{f: f, buf: bufio.NewWriterSize(f, 1<<20)}
	if c.pw, err = link.NewPcapWriter(c.buf); err != nil {
		f.Close()
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	return c, nil
}

func (c *capture) record(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = c.pw.WriteFrame(time.Now(), frame)
	}
}

// Close flushes and closes the file; the first write error, if any, is
// reported here.
func (c *capture) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.err, c.buf.Flush(), c.f.Close())
}
