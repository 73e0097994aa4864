package link

import (
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkRingBump measures kernel TCP bulk through the bump, receiving
// on AF_PACKET with recvmmsg or through rings (blocks with several retire
// timeouts; MTU-sized slots, super-frames fetched from the socket's queue;
// slots that hold super-frames), vnet headers on. Two set-ups:
//
//   - veth: both sides on AF_PACKET (TestBumpPassesVethSuperFramesWhole's
//     set-up): the client's super-frames come in on qsb1, the server's
//     ACKs on qsb2;
//   - tap: the client's kernel behind an OffloadTAP, the server on
//     AF_PACKET (BenchmarkOffloadBump's): the AF_PACKET socket receives
//     only ACKs, as the shim's and the front-end's wire sockets do under
//     a download.
//
// Besides Gbit/s it reports the system calls the bump's thread made per
// frame it forwarded (the raw_syscalls:sys_enter tracepoint, counted for
// that thread only, as perf stat -t would) and the frames one ReadBatch
// returned.
//
//	go test -run '^$' -bench RingBump -benchtime 10x ./splice/link/
func BenchmarkRingBump(b *testing.B) {
	for _, setup := range []string{"veth", "tap"} {
		for _, rx := range []struct {
			name string
			ring *RingConfig
		}{
			{"recvmmsg", nil},
			{"blocks-1ms", &RingConfig{RetireTimeout: time.Millisecond}},
			{"blocks-2ms", &RingConfig{RetireTimeout: 2 * time.Millisecond}},
			{"blocks-4ms", &RingConfig{RetireTimeout: 4 * time.Millisecond}},
			{"slots", &RingConfig{Kind: RingSlots}},
			{"slots-64k", &RingConfig{Kind: RingSlots, FrameSize: MaxFrame}},
		} {
			b.Run(setup+"/rx="+rx.name, func(b *testing.B) {
				n := newBumpNet(b, setup == "veth", false)
				cfg := AFPacketConfig{VNetHdr: true, Promiscuous: true, RxRing: rx.ring}
				var client BatchLink
				if setup == "veth" {
					client = openAFPacket(b, n.nsW, "qsb1", cfg)
				} else {
					client = n.openOffloadTAP(b)
				}
				server := openAFPacket(b, n.nsW, "qsb2", cfg)
				bp := startBump(b, client, server, nil)
				transfer(b, n, streamChunk) // set-up and ARP out of the measure
				counter := openSyscallCounter(b, int(bp.tid.Load()))
				calls0, frames0, reads0 := counter.read(b), bp.frames, bp.reads
				b.SetBytes(bulkSize)
				var total time.Duration
				for b.Loop() {
					total += transfer(b, n, bulkSize)
				}
				bp.halt(b)
				calls, frames, reads := counter.read(b)-calls0, bp.frames-frames0, bp.reads-reads0
				b.ReportMetric(float64(b.N)*bulkSize*8/total.Seconds()/1e9, "Gbit/s")
				b.ReportMetric(float64(calls)/float64(frames), "syscalls/frame")
				b.ReportMetric(float64(frames)/float64(reads), "frames/read")
			})
		}
	}
}

// mountTracefs mounts tracefs where the tracepoints' ids are read, for
// the length of the test, when nothing has (a fresh machine may boot
// without it); as root only, and quietly when it cannot.
func mountTracefs(tb testing.TB) {
	const dir = "/sys/kernel/tracing"
	if _, err := os.Stat(dir + "/events"); err == nil || os.Geteuid() != 0 {
		return
	}
	if err := unix.Mount("tracefs", dir, "tracefs", 0, ""); err != nil {
		tb.Logf("mount tracefs on %s: %v", dir, err)
		return
	}
	tb.Cleanup(func() { unix.Unmount(dir, 0) })
}

// syscallCounter counts one thread's system calls with perf_event_open(2)
// on the raw_syscalls:sys_enter tracepoint, as perf stat does.
type syscallCounter struct{ fd int }

func openSyscallCounter(tb testing.TB, tid int) syscallCounter {
	tb.Helper()
	mountTracefs(tb)
	id := -1
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		raw, err := os.ReadFile(dir + "/events/raw_syscalls/sys_enter/id")
		if err == nil {
			id, err = strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				tb.Fatal(err)
			}
			break
		}
	}
	if id < 0 {
		tb.Fatal("no raw_syscalls:sys_enter tracepoint: is tracefs mounted?")
	}
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_TRACEPOINT,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config: uint64(id),
	}
	fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		tb.Fatalf("perf_event_open for thread %d: %v", tid, err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return syscallCounter{fd}
}

func (c syscallCounter) read(tb testing.TB) int {
	tb.Helper()
	var buf [8]byte
	if n, err := unix.Read(c.fd, buf[:]); n != 8 || err != nil {
		tb.Fatalf("read the syscall counter: %d %v", n, err)
	}
	return int(binary.NativeEndian.Uint64(buf[:]))
}

// TestSyscallCounterCounts: the counter sees a thread's own system calls.
func TestSyscallCounterCounts(t *testing.T) {
	done := make(chan int)
	go func() {
		// A thread of its own, so only these calls land on it.
		runtime.LockOSThread()
		done <- unix.Gettid()
		<-done
		for range 100 {
			unix.Getpid()
		}
		done <- 0
	}()
	c := openSyscallCounter(t, <-done)
	before := c.read(t)
	done <- 0
	<-done
	if got := c.read(t) - before; got < 100 || got > 200 {
		t.Fatalf("counted %d system calls for 100 getpid calls (plus a few of the runtime's)", got)
	}
}
