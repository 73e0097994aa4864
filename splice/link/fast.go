package link

import "github.com/qsplice/qsplice/splice/wire"

// The fast path: batches, virtio-net headers and one event loop per core.
//
// A daemon's hot loop waits on a Poller (epoll) for its links' descriptors
// and the engine's next deadline, reads every frame that is waiting with
// one ReadBatch per ready link, feeds the engine, and writes the engine's
// output with one WriteBatch per link. No goroutine hand-off per frame, no
// fixed ticker, and on AF_PACKET one recvmmsg(2)/sendmmsg(2) per batch.
//
// Links opened with virtio-net headers (OffloadTAP, AFPacket with
// AFPacketConfig.VNetHdr) move TCP super-frames of up to 64 KiB with
// partial checksums: the kernel (or the NIC) segments and checksums them
// at the last moment. Each frame then travels with its wire.VNetHdr; a
// link without vnet headers gets the zero header on read, and on write
// segments a super-frame in software and completes a partial checksum
// (wire.SegmentTCP4, wire.CompleteChecksum), so an engine never has to
// know which kind of link it feeds.

// Batch is caller-owned storage for the frames one ReadBatch call
// delivers. Allocate it once per loop (NewBatch) and reuse it.
type Batch struct {
	// Bufs are the receive buffers, each at least MaxFrame bytes for a
	// link with vnet headers (super-frames) or the MTU plus the Ethernet
	// header otherwise.
	Bufs [][]byte
	// After ReadBatch returned n: frame i is Bufs[i][:Sizes[i]] and its
	// virtio-net header is VNet[i] (zero on links without vnet headers).
	Sizes []int
	VNet  []wire.VNetHdr
}

// MaxFrame is the largest frame a link with virtio-net headers delivers: a
// 64 KiB IPv4 super-frame behind an Ethernet header and a VLAN tag.
const MaxFrame = 65535 + 14 + 4

// NewBatch returns a Batch of n buffers of size bytes each.
func NewBatch(n, size int) *Batch {
	b := &Batch{Bufs: make([][]byte, n), Sizes: make([]int, n), VNet: make([]wire.VNetHdr, n)}
	for i := range b.Bufs {
		b.Bufs[i] = make([]byte, size)
	}
	return b
}

// Frame returns frame i of the last ReadBatch.
func (b *Batch) Frame(i int) []byte { return b.Bufs[i][:b.Sizes[i]] }

// BatchLink is a Link an event loop can drive without blocking: it waits
// for FD to become readable on its own Poller, then drains what is there.
// The descriptor is non-blocking.
type BatchLink interface {
	Link
	// FD is the descriptor to wait on for readability. The link keeps
	// ownership: do not close it or change its flags.
	FD() int
	// ReadBatch reads the frames waiting now, up to len(b.Bufs), without
	// blocking, and returns how many it read: 0 with a nil error when
	// none were waiting. Frames longer than their buffer are skipped and
	// counted in Stats.RxTruncated.
	ReadBatch(b *Batch) (int, error)
	// WriteBatch sends frames[i] with header hdrs[i] (hdrs may be nil:
	// all zero) and returns how many were sent; the error says why the
	// rest were not. A link without vnet headers segments super-frames
	// and completes partial checksums first. When the device's queue is
	// full it waits for room rather than dropping. Nothing is retained.
	WriteBatch(frames [][]byte, hdrs []wire.VNetHdr) (int, error)
	// VNetHdr reports whether the link carries virtio-net headers (and so
	// delivers and accepts super-frames).
	VNetHdr() bool
}
