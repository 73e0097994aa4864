package backend

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/internal/rxmod"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

var (
	modClient = wire.IP4{198, 18, 0, 10}
	modServer = wire.IP4{198, 18, 0, 21}
)

// segment is a hand-built TCP frame with flags and payload bytes.
func segment(src, dst wire.IP4, sport, dport uint16, flags uint8, payload int) []byte {
	f := wire.TCPFrame{Src: src, Dst: dst, SrcPort: sport, DstPort: dport, Seq: 1000, Ack: 2000,
		Flags: flags, Window: 512, Payload: make([]byte, payload)}
	b := make([]byte, f.Len())
	return b[:f.Encode(b)]
}

// host and client are frames from the back-end's kernel (the TAP) and
// from the wire.
func host(flags uint8, payload int) []byte {
	return segment(modServer, modClient, 80, 40000, flags, payload)
}

func client(flags uint8, payload int) []byte {
	return segment(modClient, modServer, 40000, 80, flags, payload)
}

func TestRxCountsClassifyHandBuiltFrames(t *testing.T) {
	const ack, psh, syn, fin, rst = wire.TCPFlagACK, wire.TCPFlagPSH, wire.TCPFlagSYN, wire.TCPFlagFIN, wire.TCPFlagRST
	udp := wire.UDPFrame{Src: modClient, Dst: modServer, SrcPort: 7400, DstPort: 7401, Payload: []byte("control")}
	control := make([]byte, udp.Len())
	control = control[:udp.Encode(control)]
	cases := []struct {
		name           string
		fromWire       bool
		frame          []byte
		steady, urgent int
	}{
		{"TAP: 64 KB super-frame", false, host(ack|psh, 65000), 1, 0},
		{"TAP: bulkPayload exactly", false, host(ack, bulkPayload), 1, 0},
		{"TAP: one byte under bulkPayload", false, host(ack, bulkPayload-1), 0, 1},
		{"TAP: 1 KB reply", false, host(ack|psh, 1024), 0, 1},
		{"TAP: 4 KB, a window-bound flow's", false, host(ack, 4096), 0, 1},
		{"TAP: SYN-ACK", false, host(syn|ack, 0), 0, 1},
		{"TAP: FIN with the last bytes of a bulk response", false, host(fin|ack, 65000), 0, 1},
		{"TAP: RST", false, host(rst|ack, 0), 0, 1},
		{"TAP: pure ACK", false, host(ack, 0), 0, 0},
		{"TAP: not IPv4/TCP", false, control, 0, 0},
		{"TAP: truncated", false, host(ack, 65000)[:30], 0, 0},
		{"wire: client ACK", true, client(ack, 0), 0, 0},
		{"wire: client ACK with Ethernet padding", true, append(client(ack, 0), make([]byte, 6)...), 0, 0},
		{"wire: SYN", true, client(syn, 0), 0, 1},
		{"wire: request", true, client(ack|psh, 300), 0, 1},
		{"wire: FIN", true, client(fin|ack, 0), 0, 1},
		{"wire: control datagram", true, control, 0, 1},
	}
	var p wire.Packet
	for _, c := range cases {
		var rx rxCounts
		if c.fromWire {
			rx.fromWire(c.frame, &p)
		} else {
			rx.fromHost(c.frame, &p)
		}
		if rx.steady != c.steady || rx.urgent != c.urgent {
			t.Errorf("%s: counted %d steady, %d urgent; want %d, %d", c.name, rx.steady, rx.urgent, c.steady, c.urgent)
		}
	}
}

// The shim's policy on the traffic it sees, frames classified as the
// loop classifies them: it holds, within -rx-hold, under a stream of
// bulk super-frames, and never for a thin stream, a load of short
// connections, within 2 ms of a SYN or a request, or beside a flow bound
// by a tiny window.
func TestShimModerationHoldsOnlyForBulkStreams(t *testing.T) {
	const ack, psh, syn, fin = wire.TCPFlagACK, wire.TCPFlagPSH, wire.TCPFlagSYN, wire.TCPFlagFIN
	const maxHold = 200 * time.Microsecond
	type pass struct{ tap, wire [][]byte }
	bulk := pass{tap: [][]byte{host(ack, 65000), host(ack, 65000), host(ack, 65000)}, wire: [][]byte{client(ack, 0)}}
	shortConn := pass{tap: [][]byte{host(syn|ack, 0), host(ack|psh, 1024), host(fin|ack, 0)},
		wire: [][]byte{client(syn, 0), client(ack|psh, 80), client(fin|ack, 0)}}
	thin := pass{tap: [][]byte{host(ack, 65000)}}
	cases := []struct {
		name     string
		every    time.Duration // a pass every
		passes   []pass        // repeated for 20 ms
		last     pass          // the pass just before Hold is asked
		wantHold bool
	}{
		{"bulk: 3 super-frames per 100 us", 100 * time.Microsecond, []pass{bulk}, bulk, true},
		{"bulk with a keep-alive request every 5 ms", 100 * time.Microsecond,
			append([]pass{{tap: bulk.tap, wire: [][]byte{client(ack|psh, 80)}}}, repeat(bulk, 49)...), bulk, true},
		{"bulk, and a response ended 1 ms ago", 100 * time.Microsecond,
			append(repeat(bulk, 189), pass{tap: [][]byte{host(ack|psh, 9000)}}, bulk, bulk, bulk, bulk, bulk, bulk, bulk, bulk, bulk), bulk, false},
		{"bulk beside a window-bound flow: 4 KB in every 5th pass", 100 * time.Microsecond,
			append(repeat(bulk, 4), pass{tap: append([][]byte{host(ack|psh, 4096)}, bulk.tap...)}), bulk, false},
		{"bulk, but the last pass read a SYN", 100 * time.Microsecond, []pass{bulk}, pass{tap: bulk.tap, wire: [][]byte{client(syn, 0)}}, false},
		{"bulk, but the last pass read a SYN-ACK", 100 * time.Microsecond, []pass{bulk}, pass{tap: [][]byte{host(syn|ack, 0)}}, false},
		{"thin: one super-frame per ms", time.Millisecond, []pass{thin}, thin, false},
		{"short connections", 100 * time.Microsecond, []pass{shortConn}, shortConn, false},
		{"short connections beside bulk", 100 * time.Microsecond, []pass{bulk, shortConn}, bulk, false},
	}
	var p wire.Packet
	for _, c := range cases {
		m := rxmod.New(shimModeration(maxHold))
		now := splice.Time(0)
		observe := func(ps pass) {
			var rx rxCounts
			for _, f := range ps.wire {
				rx.fromWire(f, &p)
			}
			for _, f := range ps.tap {
				rx.fromHost(f, &p)
			}
			now = now.Add(c.every)
			m.Observe(now, rx.steady, rx.urgent) // as the loop does
			if rx.narrow > 0 {
				m.Quiet(now)
			}
		}
		for i := 0; now < ms(20); i++ {
			observe(c.passes[i%len(c.passes)])
		}
		observe(c.last)
		got := m.Hold(now)
		if got > maxHold || (got > 0) != c.wantHold {
			t.Errorf("%s: Hold = %v, want a hold: %v (at most %v)", c.name, got, c.wantHold, maxHold)
		}
	}
	// Off: never.
	m := rxmod.New(shimModeration(0))
	for i := range 100 {
		m.Observe(splice.Time(i)*splice.Time(100*time.Microsecond), 3, 0)
	}
	if got := m.Hold(ms(10)); got != 0 {
		t.Errorf("-rx-hold 0: Hold = %v, want 0", got)
	}
}

func repeat[T any](v T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// blockedIn waits until thread tid is asleep in system call nr, so that
// what the test does next happens during it.
func blockedIn(t *testing.T, tid, nr int) {
	t.Helper()
	path := fmt.Sprintf("/proc/self/task/%d/syscall", tid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		if strings.HasPrefix(string(b), strconv.Itoa(nr)+" ") {
			return
		}
	}
	t.Errorf("thread %d never entered system call %d", tid, nr)
}

// holdingWorker is worker 0 of newTestWorkers with a control socket, a
// stream of bulk super-frames behind it and a policy that would hold for
// a minute: only what ends a hold early lets its wait return in time.
func holdingWorker(t *testing.T, inRing bool) (*Daemon, *worker, *net.UDPConn) {
	d := newTestWorkers(t, 2)
	fe, _ := d.attachTestControl(t)
	d.epoch = time.Now()
	w := d.workers[0]
	// wait holds only for a worker with a TAP; a typed nil is one here
	// (the hold leaves the TAP out, and nothing reads it).
	w.tap = (*link.OffloadTAP)(nil)
	if inRing {
		if err := w.poller.HoldInRing(); err != nil {
			t.Fatal(err)
		}
	}
	w.mod = rxmod.New(rxmod.Config{Window: time.Minute, MinSteady: 1, Batch: 1000, MaxHold: time.Minute})
	w.mod.Observe(d.now(), 10, 0)
	if h := w.mod.Hold(d.now()); h < 30*time.Second {
		t.Fatalf("the policy holds for %v, want a long hold", h)
	}
	return d, w, fe
}

// TestWorkerHoldEndsAtOnceForControlDatagramOrMail: a hold before the
// next pass (receive moderation) still ends as soon as a control
// datagram comes, another worker posts mail, or the daemon stops; the
// hold is then resumed after the pass that served them, and a hold that
// ran its time reports that the TAP is to be read.
func TestWorkerHoldEndsAtOnceForControlDatagramOrMail(t *testing.T) {
	for _, inRing := range []bool{true, false} {
		t.Run(fmt.Sprintf("io_uring=%v", inRing), func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := unix.Gettid()
			sleep := unix.SYS_EPOLL_PWAIT2
			if inRing {
				sleep = unix.SYS_IO_URING_ENTER
			}
			d, w, fe := holdingWorker(t, inRing)
			go func() {
				blockedIn(t, tid, sleep)
				fe.WriteToUDPAddrPort([]byte("a control datagram"), d.ctl.LocalAddr())
			}()
			n, held, err := w.wait(-1)
			if err != nil || n != 1 || w.ready[0] != tokControl || held {
				t.Fatalf("hold with a datagram sent during it: %d %v %v held=%v, want the control token", n, w.ready[:n], err, held)
			}
			if w.holdUntil == 0 {
				t.Fatal("the hold cut short is not to be resumed")
			}
			w.readControl(d.now())
			w.asleep.Store(true) // as run sets it before waiting
			go func() { blockedIn(t, tid, sleep); w.post(mail{kind: mailStatus}) }()
			n, held, err = w.wait(-1)
			if err != nil || n != 1 || w.ready[0] != link.WakeToken || held {
				t.Fatalf("hold with mail posted during it: %d %v %v held=%v, want the wake-up", n, w.ready[:n], err, held)
			}
			if !w.mailWaiting() {
				t.Fatal("no mail waiting after the wake-up")
			}
			w.box = w.box[:0] // read: nothing else touches the box here
			go func() { blockedIn(t, tid, sleep); d.stop() }()
			n, _, err = w.wait(-1)
			if err != nil || n != 1 || w.ready[0] != link.WakeToken || !d.stopping.Load() {
				t.Fatalf("hold while the daemon stops: %d %v %v", n, w.ready[:n], err)
			}
			// A hold that runs its time: the TAP is to be read.
			w.holdUntil = 0
			w.mod = rxmod.New(rxmod.Config{Window: time.Minute, MinSteady: 1, Batch: 1, MaxHold: time.Millisecond})
			w.mod.Observe(d.now(), 10, 0)
			start := time.Now()
			n, held, err = w.wait(-1)
			if err != nil || n != 0 || !held || time.Since(start) < time.Millisecond {
				t.Fatalf("a hold nothing ended: %d %v held=%v after %v", n, err, held, time.Since(start))
			}
		})
	}
}

// The loop's moderation path, a pass's counting and a hold in io_uring,
// allocates nothing.
func TestModerationPathAllocatesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, w, _ := holdingWorker(t, true)
	w.mod = rxmod.New(shimModeration(20 * time.Microsecond))
	w.mod.Observe(d.now(), 100, 0) // a bulk stream so far
	bulk, req := host(wire.TCPFlagACK, 65000), client(wire.TCPFlagACK|wire.TCPFlagPSH, 80)
	holds := 0
	allocs := testing.AllocsPerRun(200, func() {
		w.rx.fromHost(bulk, &w.pkt)
		w.rx.fromHost(bulk, &w.pkt)
		w.rx.fromWire(req[:len(req)-80], &w.pkt) // cut: counts as nothing, parsed anyway
		now := d.now()
		w.mod.Observe(now, w.rx.steady, w.rx.urgent)
		w.rx = rxCounts{}
		if _, held, err := w.wait(time.Millisecond); err == nil && held {
			holds++
		}
	})
	if holds == 0 || allocs != 0 {
		t.Fatalf("%v allocations per pass, %d holds; want 0 and the holding path run", allocs, holds)
	}
}
