// Package link moves whole Ethernet frames between the sans-I/O packet
// engine (package splice) and real or simulated devices.
//
// Place in the data flow: a daemon's event loop waits on a Poller for its
// links' descriptors, drains each ready BatchLink with ReadBatch, feeds the
// frames to the engine, and writes the engine's output with WriteBatch
// (fast.go). Simpler callers use Link.ReadFrame and Link.WriteFrame, one
// frame per call. Nothing in the engine touches a socket; everything that
// does lives here:
//
//   - AFPacket: a raw AF_PACKET socket bound to one interface (the shim's
//     veth, the front-end's uplink); a BatchLink with recvmmsg/sendmmsg,
//     optional virtio-net headers, qdisc bypass and fanout (one socket per
//     worker), memory-mapped receive (ring.go) and transmit (txring.go)
//     rings. Allocation-free read and write paths.
//   - OffloadTAP: a TAP device with virtio-net headers and TSO/checksum
//     offloads, one BatchLink per queue (the web server's side of a
//     back-end, on the fast path).
//   - TAP: a TAP device through songgao/water, the portable adapter.
//   - Mem: an in-memory connected pair for tests and simulations.
//   - Recorder: a wrapper that writes every frame to a pcap file.
//   - Impair: a wrapper that delays, drops, reorders and rate-limits egress
//     frames (tc netem is not available on the lab machines).
//   - Poller: the epoll wrapper the event loops wait on. The descriptors
//     it watches (AF_PACKET sockets, TAP queues, the control socket) are
//     kept out of Go's netpoller (pollfd.go), so a frame wakes the loop
//     only, not also the runtime's netpoll thread.
//   - ControlSocket: the daemons' control-protocol UDP socket, read and
//     written from the same loop (recvmmsg/sendmmsg, no allocation).
//
// Frames never carry an FCS. There are two kinds of link
// (docs/architecture.md §7):
//
//   - Without virtio-net headers (TAP, Mem, AFPacket by default): frames
//     are complete and at most the MTU. Offloads must be off on the
//     devices involved (see DisableOffloads), otherwise AF_PACKET reads
//     partial checksums and GSO super-frames it cannot tell apart.
//   - With virtio-net headers (OffloadTAP, AFPacket with
//     AFPacketConfig.VNetHdr): ReadBatch and WriteBatch move each frame
//     with a wire.VNetHdr, so TCP super-frames of up to 64 KiB with
//     partial checksums pass whole and the kernel or the NIC does the
//     segmenting. Their ReadFrame completes what the header left open, so
//     Link callers still get self-contained frames.
//
// Between the two, WriteBatch on a link without vnet headers segments
// super-frames and completes partial checksums in software, so an engine
// can feed either kind.
package link

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
)

// Link moves whole Ethernet frames (no FCS, no vnet header; see BatchLink
// for links that carry one).
//
// Implementations in this package allow one ReadFrame and one WriteFrame to
// run concurrently with each other and with Close, Name and Stats.
type Link interface {
	// ReadFrame blocks until a frame arrives, copies it into buf and returns
	// its length. A frame longer than buf is dropped and counted in
	// Stats.RxTruncated, and ReadFrame reads the next one.
	ReadFrame(buf []byte) (int, error)
	// WriteFrame sends one frame; it must not retain the slice after
	// returning.
	WriteFrame(frame []byte) error
	// Close unblocks a pending ReadFrame with an error wrapping
	// net.ErrClosed.
	Close() error
	// Name identifies the link in logs and errors (usually the interface
	// name).
	Name() string
	// Stats returns a snapshot of the link's counters.
	Stats() Stats
}

// Stats counts frames through a link. Each field is updated atomically, but a
// snapshot is not taken atomically across fields.
type Stats struct {
	RxFrames, RxBytes uint64 // frames delivered by ReadFrame
	TxFrames, TxBytes uint64 // frames accepted by the device
	RxTruncated       uint64 // frames longer than the caller's buffer, skipped
	TxErrors          uint64 // WriteFrame calls that returned an error
	// TxDropped counts frames WriteFrame accepted (returned nil) that the
	// link then discarded on purpose, as a NIC does with a full queue: a
	// full Mem queue, an Impair loss or a full Impair delay line.
	TxDropped uint64
	// TxInWait counts the TxFrames sent inside a poller's wait, in its
	// io_uring_enter (Poller.SendWith): the frames that cost no system
	// call of their own.
	TxInWait uint64
}

// Add adds o's counts to s (the links of a sharded daemon).
func (s *Stats) Add(o Stats) {
	s.RxFrames += o.RxFrames
	s.RxBytes += o.RxBytes
	s.TxFrames += o.TxFrames
	s.TxBytes += o.TxBytes
	s.RxTruncated += o.RxTruncated
	s.TxErrors += o.TxErrors
	s.TxDropped += o.TxDropped
	s.TxInWait += o.TxInWait
}

// counters is the atomically updated form of Stats shared by the adapters.
type counters struct {
	rxFrames, rxBytes   atomic.Uint64
	txFrames, txBytes   atomic.Uint64
	rxTruncated         atomic.Uint64
	txErrors, txDropped atomic.Uint64
	txInWait            atomic.Uint64
}

func (c *counters) received(n int) {
	c.rxFrames.Add(1)
	c.rxBytes.Add(uint64(n))
}

func (c *counters) sent(n int) {
	c.txFrames.Add(1)
	c.txBytes.Add(uint64(n))
}

func (c *counters) snapshot() Stats {
	return Stats{
		RxFrames:    c.rxFrames.Load(),
		RxBytes:     c.rxBytes.Load(),
		TxFrames:    c.txFrames.Load(),
		TxBytes:     c.txBytes.Load(),
		RxTruncated: c.rxTruncated.Load(),
		TxErrors:    c.txErrors.Load(),
		TxDropped:   c.txDropped.Load(),
		TxInWait:    c.txInWait.Load(),
	}
}

// errEmptyBuffer is returned by ReadFrame when buf has no room at all; every
// frame would be truncated and ReadFrame would never return.
var errEmptyBuffer = errors.New("read buffer is empty")

// closedError reports an operation on a closed link, wrapping net.ErrClosed
// so callers can test with errors.Is.
func closedError(name, op string) error {
	return fmt.Errorf("link %s: %s: %w", name, op, net.ErrClosed)
}
