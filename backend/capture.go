package backend

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/qsplice/qsplice/splice/link"
)

// capture records the wire side (every frame read from and written to the
// wire sockets, super-frames whole) to a pcap file, or, for a path ending
// in ".pcapng", to a pcapng file whose interface 0 is the wire (frames
// marked inbound or outbound) and interface 1 the control socket's
// datagrams as IPv4/UDP packets (link.CaptureInterfaces). The workers
// share it under a lock: a debugging aid, not the fast path.
type capture struct {
	mu  sync.Mutex
	f   *os.File
	buf *bufio.Writer
	pw  *link.PcapWriter            // pcap, or
	ng  *link.PcapngWriter          // pcapng
	ngw *link.PcapngInterfaceWriter // its wire interface
	err error
}

func openCapture(path, wire string) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	c := &capture{f: f, buf: bufio.NewWriterSize(f, 1<<20)}
	if strings.HasSuffix(path, ".pcapng") {
		if c.ng, err = link.NewPcapngWriter(c.buf, link.CaptureInterfaces(wire)...); err == nil {
			c.ngw = c.ng.Interface(0, nil)
		}
	} else {
		c.pw, err = link.NewPcapWriter(c.buf)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	return c, nil
}

// record writes a wire frame, read (inbound) or written.
func (c *capture) record(frame []byte, inbound bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if c.ngw != nil {
		c.err = c.ngw.WriteFrameDir(time.Now(), frame, inbound)
	} else {
		c.err = c.pw.WriteFrame(time.Now(), frame)
	}
}

// recordControl makes the control socket's datagrams captured (pcapng
// only: a pcap file holds one link type).
func (c *capture) recordControl(s *link.ControlSocket) {
	if c.ng != nil {
		s.Record(c.ng.ControlRecorder(1, time.Now))
	}
}

// Close flushes and closes the file; the first write error, if any, is
// reported here.
func (c *capture) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.err, c.buf.Flush(), c.f.Close())
}
