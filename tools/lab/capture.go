package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/mdlayher/packet"
	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

const (
	// captureSnap bounds a captured frame. Offloads are off on the lab
	// links, so frames are at most an MTU; the margin keeps the rare
	// super-frame whole enough to diagnose.
	captureSnap   = 256 << 10
	captureRcvBuf = 4 << 20 // the default socket buffer drops under bulk TCP
)

// StartCapture records every frame that passes the switch port of host
// (the switch-side veth named after it: "fe", "b1", "c1") in both
// directions, into a pcap file with nanosecond kernel timestamps. stop
// ends the capture, closes the file and returns the number of frames.
func (l *Lab) StartCapture(host, file string) (stop func() (frames int, err error), err error) {
	c, err := l.startCapture(host, file, 0)
	if err != nil {
		return nil, err
	}
	return c.stop, nil
}

// Capture is StartCapture for a bounded time: it records until ctx ends or,
// if count > 0, until count frames are written.
func (l *Lab) Capture(ctx context.Context, host, file string, count int) (frames int, err error) {
	c, err := l.startCapture(host, file, count)
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
	case <-c.done:
	}
	return c.stop()
}

// capture is a running capture.
type capture struct {
	conn     *packet.Conn
	file     *os.File
	buf      *bufio.Writer
	stopping atomic.Bool
	done     chan struct{} // closed when the read loop has ended
	frames   int           // valid after done
	loopErr  error         // valid after done
	once     sync.Once
	stopErr  error
}

func (l *Lab) startCapture(host, file string, count int) (*capture, error) {
	if err := l.checkHost(host); err != nil {
		return nil, err
	}
	if host == "sw" {
		return nil, errors.New("lab: capture needs a host's switch port (c1, fe, b1...), not sw")
	}
	var conn *packet.Conn
	// The socket must be made inside the switch namespace, where the port
	// lives; once made, it can be read from any thread.
	err := netns.Do(l.NS("sw"), func() error {
		ifi, err := net.InterfaceByName(host)
		if err != nil {
			return err
		}
		conn, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: capture on %s: %w", host, err)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	var sockErr error
	err = rc.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		if sockErr == nil && unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, captureRcvBuf) != nil {
			sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, captureRcvBuf)
		}
	})
	if err = errors.Join(err, sockErr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lab: capture socket options: %w", err)
	}

	f, err := os.Create(file)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("lab: %w", err)
	}
	c := &capture{conn: conn, file: f, buf: bufio.NewWriterSize(f, 1<<20), done: make(chan struct{})}
	w := pcapgo.NewWriterNanos(c.buf)
	if err := w.WriteFileHeader(captureSnap, layers.LinkTypeEthernet); err != nil {
		conn.Close()
		f.Close()
		return nil, fmt.Errorf("lab: %w", err)
	}
	go func() {
		defer close(c.done)
		c.frames, c.loopErr = captureLoop(rc, w, count)
		if c.stopping.Load() {
			c.loopErr = nil // the read ended at stop's drain deadline
		}
	}()
	return c, nil
}

// captureDrain is how long stop lets the capture read what is queued.
const captureDrain = 100 * time.Millisecond

// stop ends the capture and closes the file; it may be called many times.
func (c *capture) stop() (int, error) {
	c.once.Do(func() {
		c.stopping.Store(true)
		// Frames already queued on the socket belong to the capture:
		// closing at once would throw them away. Let the loop drain the
		// queue, then give up once it has been idle for captureDrain.
		c.conn.SetReadDeadline(time.Now().Add(captureDrain))
		<-c.done
		cerr := c.conn.Close()
		c.stopErr = errors.Join(c.loopErr, cerr, c.buf.Flush(), c.file.Close())
	})
	return c.frames, c.stopErr
}

// captureLoop reads frames with their kernel receive timestamps and writes
// them out until the socket fails (or is closed), or count frames (if
// count > 0) are written.
func captureLoop(rc syscall.RawConn, w *pcapgo.Writer, count int) (int, error) {
	buf := make([]byte, captureSnap)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	frames := 0
	for count <= 0 || frames < count {
		var n, oobn int
		var recvErr error
		err := rc.Read(func(fd uintptr) bool {
			// MSG_TRUNC makes n the frame's real length even if it was cut.
			n, oobn, _, _, recvErr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_TRUNC)
			return recvErr != unix.EAGAIN
		})
		if err == nil {
			err = recvErr
		}
		if err != nil {
			return frames, err
		}
		ts := cmsgTimestamp(oob[:oobn])
		ci := gopacket.CaptureInfo{Timestamp: ts, Length: n, CaptureLength: min(n, len(buf))}
		if err := w.WritePacket(ci, buf[:ci.CaptureLength]); err != nil {
			return frames, err
		}
		frames++
	}
	return frames, nil
}

// cmsgTimestamp returns the SO_TIMESTAMPNS time of a received frame, or now
// if the kernel did not attach one.
func cmsgTimestamp(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS &&
				len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				// Copied byte-wise: the data need not be aligned.
				var ts unix.Timespec
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), m.Data)
				return time.Unix(ts.Unix())
			}
		}
	}
	return time.Now()
}
