package link

import (
	"fmt"
	"sync"
)

// Mem is one end of an in-memory connected pair of links, for tests and
// simulations: a frame written on one end is copied and appears on the other.
//
// Each direction is a queue of depth frames. WriteFrame never blocks: when
// the peer's queue is full the frame is dropped and counted in
// Stats.TxDropped, as a NIC drops on a full ring. Closing one end is pulling
// the cable out of it: its own reads and writes fail with net.ErrClosed, the
// frames queued for it are discarded, and the peer's later writes are
// dropped and counted in the peer's TxDropped.
//
// Steady-state operation allocates nothing: frame buffers circulate between
// a queue and a free list.
type Mem struct {
	name    string
	inbound *memQueue // frames waiting for this end's ReadFrame
	peer    *Mem

	closeOnce sync.Once
	closed    chan struct{}
	ctr       counters
}

// memQueue is one direction of the pair.
type memQueue struct {
	frames chan []byte // written, not yet read
	free   chan []byte // buffers to reuse, so copies do not allocate
}

var _ Link = (*Mem)(nil)

// NewMemPair returns two connected links named "mem-a" and "mem-b". Each
// direction holds up to depth frames; depth must be at least 1.
func NewMemPair(depth int) (a, b *Mem) {
	if depth < 1 {
		panic(fmt.Sprintf("link: NewMemPair depth %d, need at least 1", depth))
	}
	newEnd := func(name string) *Mem {
		return &Mem{
			name: name,
			inbound: &memQueue{
				frames: make(chan []byte, depth),
				free:   make(chan []byte, depth),
			},
			closed: make(chan struct{}),
		}
	}
	a, b = newEnd("mem-a"), newEnd("mem-b")
	a.peer, b.peer = b, a
	return a, b
}

// ReadFrame implements Link.
func (m *Mem) ReadFrame(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("link %s: read: %w", m.name, errEmptyBuffer)
	}
	for {
		// Checked first so that a closed end never returns queued frames,
		// whatever select would pick when both cases are ready.
		if m.isClosed() {
			return 0, closedError(m.name, "read")
		}
		select {
		case <-m.closed:
			return 0, closedError(m.name, "read")
		case frame := <-m.inbound.frames:
			if len(frame) > len(buf) {
				m.ctr.rxTruncated.Add(1)
				m.inbound.recycle(frame)
				continue
			}
			n := copy(buf, frame)
			m.inbound.recycle(frame)
			m.ctr.received(n)
			return n, nil
		}
	}
}

// WriteFrame implements Link. It copies frame into the peer's queue.
func (m *Mem) WriteFrame(frame []byte) error {
	if m.isClosed() {
		m.ctr.txErrors.Add(1)
		return closedError(m.name, "write")
	}
	if m.peer.isClosed() {
		m.ctr.txDropped.Add(1)
		return nil
	}
	q := m.peer.inbound
	var buf []byte
	select {
	case buf = <-q.free:
	default:
	}
	buf = append(buf[:0], frame...)
	select {
	case q.frames <- buf:
		m.ctr.sent(len(frame))
	default:
		q.recycle(buf)
		m.ctr.txDropped.Add(1)
	}
	return nil
}

// Close implements Link. It is idempotent.
func (m *Mem) Close() error {
	m.closeOnce.Do(func() {
		close(m.closed)
		// Drop what was queued for us so the buffers can be collected.
		for {
			select {
			case <-m.inbound.frames:
			default:
				return
			}
		}
	})
	return nil
}

// Name implements Link.
func (m *Mem) Name() string { return m.name }

// Stats implements Link.
func (m *Mem) Stats() Stats { return m.ctr.snapshot() }

func (m *Mem) isClosed() bool {
	select {
	case <-m.closed:
		return true
	default:
		return false
	}
}

// recycle offers buf back to the free list; when the list is full the
// buffer is left to the garbage collector.
func (q *memQueue) recycle(buf []byte) {
	select {
	case q.free <- buf:
	default:
	}
}
