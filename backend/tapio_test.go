package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

func TestParseTAPIO(t *testing.T) {
	for in, want := range map[string]TAPIO{"": TAPIOAuto, "auto": TAPIOAuto, "uring": TAPIOURing, "rw": TAPIORW} {
		if got, err := ParseTAPIO(in); got != want || err != nil {
			t.Errorf("ParseTAPIO(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := ParseTAPIO("epoll"); err == nil {
		t.Error("ParseTAPIO accepted epoll")
	}
	if err := (&Config{TAPIO: "bogus"}).validate(); err == nil || !strings.Contains(err.Error(), "tap-io") {
		t.Errorf("validate with -tap-io bogus: %v", err)
	}
}

// countingHandler passes records to next and counts those whose message
// contains substr.
type countingHandler struct {
	slog.Handler
	substr string
	n      *atomic.Int32
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

// TestDaemonTAPIO runs the shim with each way of driving the TAP and
// downloads through it byte for byte: io_uring (what auto picks on this
// kernel), read/write (also the default), and auto on a kernel that
// refuses io_uring, which falls back to read/write and says so once
// (-tap-io uring there fails).
func TestDaemonTAPIO(t *testing.T) {
	refuse := func(*link.OffloadTAP) (*link.UringTAP, error) {
		return nil, fmt.Errorf("io_uring_setup: %w", unix.ENOSYS)
	}
	for _, c := range []struct {
		name    string
		mode    TAPIO
		workers int
		refused bool
		want    string // Daemon.tapIO
	}{
		{"auto-2", TAPIOAuto, 2, false, "uring"},
		{"uring-1", TAPIOURing, 1, false, "uring"},
		{"rw-2", TAPIORW, 2, false, "rw"},
		{"default-1", "", 1, false, "uring"},
		{"default-refused-1", "", 1, true, "rw"},
		{"auto-refused-2", TAPIOAuto, 2, true, "rw"},
		{"uring-refused-1", TAPIOURing, 1, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.refused {
				real := openURing
				openURing = refuse
				t.Cleanup(func() { openURing = real })
			}
			r := newDaemonRig(t, true, c.workers)
			cfg := r.config()
			cfg.TAPIO = c.mode
			var warnings atomic.Int32
			log := slog.New(countingHandler{slog.NewTextHandler(testWriter{t}, nil), "io_uring unavailable", &warnings})
			made := make(chan *Daemon, 1)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				errc <- netns.Do(r.be, func() error {
					d, err := New(cfg, log)
					made <- d
					if err != nil {
						return err
					}
					return d.Run(ctx)
				})
			}()
			d := <-made
			if c.want == "" {
				if err := <-errc; d != nil || err == nil || !errors.Is(err, unix.ENOSYS) {
					t.Fatalf("New with -tap-io uring on a refusing kernel: %v, %v", d, err)
				}
				cancel()
				return
			}
			t.Cleanup(func() {
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
			if d == nil {
				t.Fatalf("New: %v", <-errc)
			}
			if got := d.tapIO(); got != c.want {
				t.Errorf("TAP driven by %s, want %s", got, c.want)
			}
			if w := warnings.Load(); (w == 1) != c.refused || w > 1 {
				t.Errorf("%d warnings about io_uring, refused %v", w, c.refused)
			}
			downloadThroughShim(t, r, 64<<20)
			st := r.status()
			if st.TAP.RxFrames == 0 || st.TAP.TxFrames == 0 {
				t.Errorf("TAP counters %+v: the transfer did not cross it", st.TAP)
			}
		})
	}
}

// downloadThroughShim serves size bytes of a counting stream from the
// back-end's kernel (behind the shim's TAP) and checks them word by word
// in the front-end's namespace.
func downloadThroughShim(t *testing.T, r *daemonRig, size int) {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(r.be, func() (err error) {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
			return serr
		}}
		ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(backendAddr, 8080).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const chunk = 64 << 10
	fill := func(b []byte, word uint64) {
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], word)
			word++
		}
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, chunk)
		for off := 0; off < size; off += chunk {
			fill(b, uint64(off/8))
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	var conn net.Conn
	if err := netns.Do(r.fe, func() (err error) {
		conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(backendAddr, 8080).String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // failsafe only
	got, want := make([]byte, chunk), make([]byte, chunk)
	for off := 0; off < size; off += chunk {
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("after %d of %d bytes: %v", off, size, err)
		}
		fill(want, uint64(off/8))
		for i := 0; i < chunk; i += 8 {
			if g, w := binary.LittleEndian.Uint64(got[i:]), binary.LittleEndian.Uint64(want[i:]); g != w {
				t.Fatalf("stream corrupted at byte %d: word %d, want %d", off+i, g, w)
			}
		}
	}
	if k, err := conn.Read(got); k != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("%d bytes past the end, %v", k, err)
	}
}
