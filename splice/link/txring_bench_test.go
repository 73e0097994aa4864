package link

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkTxRingBump compares the two ways WriteBatch sends on
// AF_PACKET, sendmmsg and the transmit ring, in the shim's set-up: the
// client's kernel behind an OffloadTAP hands the bump super-frames, which
// the bump writes to an AF_PACKET socket with vnet headers on the
// server's veth (BenchmarkOffloadBump's "offload" case, the shim's
// response path). Besides Gbit/s it reports the bump thread's system
// calls and CPU time per GB moved.
//
//	go test -run '^$' -bench TxRingBump -benchtime 20x ./splice/link/
func BenchmarkTxRingBump(b *testing.B) {
	for _, tx := range []struct {
		name string
		ring *TxRingConfig
	}{
		{"sendmmsg", nil},
		{"ring", &TxRingConfig{}},
	} {
		b.Run("tx="+tx.name, func(b *testing.B) {
			n := newBumpNet(b, false, false)
			tap := n.openOffloadTAP(b)
			af := openAFPacket(b, n.nsW, "qsb2", AFPacketConfig{VNetHdr: true, Promiscuous: true, TxRing: tx.ring})
			if _, ok := af.TxRing(); ok != (tx.ring != nil) {
				b.Fatalf("transmit ring in use: %v, want %v (%v)", ok, tx.ring != nil, af.TxRingError())
			}
			bp := startBump(b, tap, af, nil)
			transfer(b, n, streamChunk) // set-up and ARP out of the measure
			tid := int(bp.tid.Load())
			counter := openSyscallCounter(b, tid)
			calls0, cpu0 := counter.read(b), threadCPUTime(b, tid)
			b.SetBytes(bulkSize)
			var total time.Duration
			for b.Loop() {
				total += transfer(b, n, bulkSize)
			}
			calls, cpu := counter.read(b)-calls0, threadCPUTime(b, tid)-cpu0
			bp.halt(b)
			gb := float64(b.N) * bulkSize / 1e9
			b.ReportMetric(float64(b.N)*bulkSize*8/total.Seconds()/1e9, "Gbit/s")
			b.ReportMetric(float64(calls)/gb, "syscalls/GB")
			b.ReportMetric(cpu.Seconds()/gb, "CPU-s/GB")
			if tx.ring != nil {
				rs := af.TxRingStats()
				b.ReportMetric(float64(rs.Overflow), "overflow")
			}
		})
	}
}

// threadCPUTime is the user and system time thread tid of this process
// used, from /proc (clock ticks of 10 ms).
func threadCPUTime(tb testing.TB, tid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.Atoi(fields[11])
	st, err2 := strconv.Atoi(fields[12])
	if err1 != nil || err2 != nil {
		tb.Fatalf("stat of thread %d: %q", tid, s)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
