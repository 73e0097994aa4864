package link

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// Sending a pass's frames inside the loop's next wait (Poller.SendWith).
//
// A daemon's pass ends with one sendmmsg(2) of the frames it produced and
// the next pass begins with one wait: two system calls per pass, which
// under bulk load, where a pass moves a dozen frames, is most of what the
// front-end's loops cost in system calls. When the loop holds in an
// io_uring (Poller.HoldInRing; with WaitInRing it also waits there), the
// frames can go in the same io_uring_enter(2) that starts the hold:
// QueueBatch fills the messages sendmmsg would have sent, and the hold
// puts one IORING_OP_SENDMSG per message in the ring ahead of its polls
// (a wait in epoll sends them with sendmmsg first). The kernel issues
// them in order inside the call, on the loop's thread, as sendmmsg would:
//
//   - MSG_DONTWAIT makes a send that finds the socket full fail at once
//     (the ring does not keep it to retry later), so every send is over
//     when io_uring_enter returns and the frames' buffers are free again
//     as they are after sendmmsg: the caller may reuse them in the next
//     pass, as before;
//   - the sends are linked (IOSQE_IO_LINK): one that fails cancels those
//     after it, so none overtakes it. A socket out of room (EAGAIN,
//     ENOBUFS: the shim's 64 KB super-frames fill it) ends the wait, and
//     the rest go at once with sendmmsg, which waits for room as a
//     write always did; a frame refused for itself is counted and
//     skipped, and those after it go the same way;
//   - IOSQE_CQE_SKIP_SUCCESS leaves out the completions of the sends that
//     succeed, so they neither end the wait nor cost a reap; a failed one
//     posts a completion, which the wait hands to the link to count
//     (Stats.TxErrors) and to keep for TakeSendError;
//   - the socket is a registered file of the ring (file 0), so a send
//     never reaches a descriptor number the process closed and reused.
//
// Frames a wait cannot take whole (more than a batch, a frame that needs
// software offloads, a link with a transmit ring) go out at once with
// WriteBatch, after what was queued: order is kept.

// sendTag marks the user data of a send's entry (the low bits are its
// message); the poller's polls use small indexes.
const sendTag = 1 << 63

// ringSends is what an AFPacket queued for its poller's next wait. Only
// the loop's goroutine touches it (QueueBatch, the wait).
type ringSends struct {
	b batchState
	// failed marks the messages whose send failed in the last wait;
	// first is the first of them the ring reported (-1: none), with why.
	failed     [maxBatch]bool
	first      int
	firstErrno unix.Errno
	// err is the first failure not yet taken (TakeSendError), count how
	// many failed since.
	err   error
	count int
}

// canQueue says whether the link can send in a poller's wait, and if so
// prepares its queue.
func (a *AFPacket) canQueue() error {
	if a.closed.Load() {
		return closedError(a.name, "send in the wait")
	}
	if a.txr != nil {
		return fmt.Errorf("afpacket %s: has a transmit ring", a.name)
	}
	if a.later == nil {
		q := &ringSends{b: batchState{vnet: a.vnet}}
		q.b.do = q.b.sendmmsg
		a.later = q
	}
	return nil
}

// QueueBatch is WriteBatch for a link a poller sends with
// (Poller.SendWith): the frames go out at the start of the poller's next
// Wait or Hold, in its io_uring_enter, and until then the caller must
// leave them as they are. What the wait cannot take goes out at once,
// after what was queued before (see above); a link no poller sends with
// writes at once. It returns what WriteBatch returns for the frames
// written at once, and len(frames) when all were queued; a queued frame
// that fails is counted when the wait sends it (TakeSendError).
func (a *AFPacket) QueueBatch(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	q := a.later
	if q == nil || a.closed.Load() || hdrs != nil && len(hdrs) < len(frames) || q.b.count+len(frames) > maxBatch {
		return a.writeNow(frames, hdrs)
	}
	for i, f := range frames {
		var h wire.VNetHdr
		if hdrs != nil {
			h = hdrs[i]
		}
		if len(f) == 0 || !q.b.vnet && (h.NeedsCsum() || h.IsGSO()) {
			return a.writeNow(frames, hdrs)
		}
	}
	for i, f := range frames {
		var h wire.VNetHdr
		if hdrs != nil {
			h = hdrs[i]
		}
		q.b.add(f, h, i)
	}
	return len(frames), nil
}

// writeNow sends what is queued, then frames, with sendmmsg.
func (a *AFPacket) writeNow(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	if err := a.FlushQueued(); err != nil {
		a.keepSendError(err)
	}
	return a.WriteBatch(frames, hdrs)
}

// FlushQueued sends the frames QueueBatch queued, now, with sendmmsg: for
// what must leave before something the wait would send after it.
func (a *AFPacket) FlushQueued() error {
	q := a.later
	if q == nil || q.b.count == 0 {
		return nil
	}
	n := q.b.count
	_, err := a.flushMsgsOf(&q.b) // empties it
	if err != nil {
		a.ctr.txErrors.Add(uint64(n - q.b.sent))
	}
	return err
}

// reset empties the queue, dropping its references to the frames.
func (q *ringSends) reset() {
	clear(q.b.iov[:2*q.b.count])
	q.b.count = 0
}

// queueSends puts the queued messages in r, one IORING_OP_SENDMSG each,
// and returns how many; none if r has no room for all of them and the
// polls to follow (they go out now instead: order is kept).
func (a *AFPacket) queueSends(r *uring) int {
	q := a.later
	n := q.b.count
	if n == 0 {
		return 0
	}
	if r.room() < uint32(n+ringHoldEntries) || a.closed.Load() {
		if err := a.FlushQueued(); err != nil {
			a.keepSendError(err)
		}
		return 0
	}
	for m := range n {
		e := r.next(uringOpSendmsg, sendTag|uint64(m))
		e.fd = 0 // the registered socket (Poller.SendWith)
		e.flags = uringSQEFixedFile | uringSQECQESkipSuccess
		e.addr = uint64(uintptr(unsafe.Pointer(&q.b.hdrs[m].hdr)))
		e.len = 1
		e.opFlags = unix.MSG_DONTWAIT // msg_flags
		if m < n-1 {
			e.flags |= uringSQEIOLink
		}
	}
	clear(q.failed[:n])
	q.first = -1
	return n
}

// sendFailed records the failure a send's completion reports: the first
// one, which cancelled those after it.
func (a *AFPacket) sendFailed(c *uringCQE) {
	q := a.later
	m := int(c.userData &^ sendTag)
	if m >= q.b.count || c.res >= 0 {
		return
	}
	if errno := unix.Errno(-c.res); errno != unix.ECANCELED && (q.first < 0 || m < q.first) {
		q.first, q.firstErrno = m, errno
	}
}

// notTaken records that the ring did not take the sends from m on: they
// go with the others held back (sendsTaken).
func (a *AFPacket) notTaken(m int) {
	q := a.later
	if q.first < 0 || m < q.first {
		q.first, q.firstErrno = m, unix.EAGAIN
	}
}

// sendRest sends the queued messages from m on with sendmmsg (the ring
// did not take them); those it could not send count as failed.
func (a *AFPacket) sendRest(m int) {
	q := a.later
	q.b.sent, q.b.errno = m, 0
	err := a.sendFD().Write(q.b.do)
	for i := q.b.sent; i < q.b.count; i++ {
		q.failed[i] = true
	}
	switch {
	case err != nil:
		a.keepSendError(fmt.Errorf("afpacket %s: write: %w", a.name, err))
	case q.b.errno != 0:
		a.keepSendError(fmt.Errorf("afpacket %s: sendmmsg frame of %d bytes: %w", a.name, q.b.iov[2*q.b.sent+1].Len, q.b.errno))
	}
}

// sendsTaken ends the sends of a wait, which are over: those before the
// first failure went; from it on, a socket out of room sends the rest
// now with sendmmsg (waiting for room), and a frame refused for itself
// is counted and the ones after it sent so. The link counts what went
// and empties the queue.
func (a *AFPacket) sendsTaken() {
	q := a.later
	inWait := q.b.count // sent by the ring: those before the first failure
	if f := q.first; f >= 0 {
		inWait = f
		from := f
		if q.firstErrno != unix.EAGAIN && q.firstErrno != unix.ENOBUFS {
			q.failed[f] = true
			a.keepSendError(fmt.Errorf("afpacket %s: send of a frame of %d bytes in the wait: %w",
				a.name, q.b.iov[2*f+1].Len, q.firstErrno))
			from = f + 1
		}
		if from < q.b.count {
			a.sendRest(from)
		}
		q.first = -1
	}
	for m := range q.b.count {
		if q.failed[m] {
			a.ctr.txErrors.Add(1)
			continue
		}
		a.ctr.sent(int(q.b.iov[2*m+1].Len))
	}
	a.ctr.txInWait.Add(uint64(inWait))
	q.reset()
}

// keepSendError keeps the first failure of the queued sends for
// TakeSendError and counts the others.
func (a *AFPacket) keepSendError(err error) {
	q := a.later
	if q.err == nil {
		q.err = err
	}
	q.count++
}

// TakeSendError returns the first failure of a frame queued with
// QueueBatch since the last call and how many failed in all, and forgets
// them: the loop logs them, as it does WriteBatch's errors.
func (a *AFPacket) TakeSendError() (error, int) {
	q := a.later
	if q == nil || q.count == 0 {
		return nil, 0
	}
	err, n := q.err, q.count
	q.err, q.count = nil, 0
	return err, n
}

var errNotRegistered = errors.New("poller: send with the wait: the link's socket could not be registered with the ring")

// registerSendFile registers a's socket as file 0 of r.
func (a *AFPacket) registerSendFile(r *uring) error {
	files := [1]int32{int32(a.fd)}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterFiles,
		uintptr(unsafe.Pointer(&files[0])), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("%w: %w", errNotRegistered, errno)
	}
	return nil
}
