package link

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/internal/queue"
)

// ImpairConfig describes the egress impairment of a link, after tc netem,
// which the lab machines lack. The zero value impairs nothing but still
// passes frames through the delay line's goroutine.
type ImpairConfig struct {
	// Delay is added to every frame that is not reordered; Jitter spreads
	// it uniformly over [Delay-Jitter, Delay+Jitter] (never below zero).
	// Jitter never reorders: a frame leaves no earlier than the frame
	// written before it.
	Delay, Jitter time.Duration
	// Loss is the probability in [0, 1] that a frame is dropped.
	Loss float64
	// Reorder is the probability in [0, 1] that a frame skips the delay
	// line and the rate limiter and leaves at once, overtaking the frames
	// still queued. As with netem, it has no visible effect without Delay
	// or RateBitsPerSec.
	Reorder float64
	// RateBitsPerSec serialises frames as on a link of that speed, counting
	// the frame bytes given (no preamble, FCS or gap); 0 means unlimited.
	// The transmission time comes before the delay.
	RateBitsPerSec int64
	// Seed makes the loss, reorder and jitter draws reproducible: the
	// n-th frame written gets the same decisions on every run.
	Seed uint64
	// QueueLimit bounds the frames waiting in the delay line; frames beyond
	// it are dropped as a full queue would. Zero means 1000 (netem's
	// default limit).
	QueueLimit int
}

const defaultImpairQueueLimit = 1000

// ImpairStats counts the impairment's own decisions.
type ImpairStats struct {
	Lost, Reordered, Overflowed uint64
	Queued                      int // frames waiting in the delay line now
}

// Impair is a Link wrapper that impairs the frames written to it (egress);
// frames read pass through untouched.
//
// WriteFrame takes its decisions at once (see impairSchedule) and queues
// the frame with its departure time; one goroutine, woken by a timer, hands
// frames to the wrapped link in departure order. Dropped frames still
// return nil from WriteFrame and are counted in Stats.TxDropped, like a
// real link that loses them on the way. Close stops the goroutine, discards
// queued frames and closes the wrapped link.
type Impair struct {
	link Link
	now  func() time.Time

	mu       sync.Mutex
	schedule impairSchedule
	// line is the delay line, keyed by departure time as a duration since
	// epoch (see queueDeparture).
	line  queue.Heap[time.Duration, departure]
	epoch time.Time
	free  [][]byte // frame buffers to reuse
	limit int

	wake      chan struct{} // a new frame is first in line
	done      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool

	lost, reordered, overflowed atomic.Uint64
}

var _ Link = (*Impair)(nil)

// NewImpair wraps l and starts the delay line's goroutine; Close stops it.
func NewImpair(l Link, cfg ImpairConfig) *Impair {
	limit := cfg.QueueLimit
	if limit <= 0 {
		limit = defaultImpairQueueLimit
	}
	im := &Impair{
		link:     l,
		now:      time.Now,
		schedule: newImpairSchedule(cfg),
		limit:    limit,
		epoch:    time.Now(),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	go im.run()
	return im
}

// ReadFrame implements Link; ingress is not impaired.
func (im *Impair) ReadFrame(buf []byte) (int, error) { return im.link.ReadFrame(buf) }

// WriteFrame implements Link. It copies frame and never blocks on the
// wrapped link.
func (im *Impair) WriteFrame(frame []byte) error {
	if im.closed.Load() {
		return closedError(im.link.Name(), "write")
	}
	im.mu.Lock()
	v := im.schedule.admit(im.now(), len(frame))
	switch {
	case v.drop:
		im.mu.Unlock()
		im.lost.Add(1)
		return nil
	case im.line.Len() >= im.limit:
		im.mu.Unlock()
		im.overflowed.Add(1)
		return nil
	}
	if v.reordered {
		im.reordered.Add(1)
	}
	var buf []byte
	if n := len(im.free); n > 0 {
		buf, im.free = im.free[n-1], im.free[:n-1]
	}
	buf = append(buf[:0], frame...)
	im.queueDeparture(departure{at: v.depart, seq: v.seq, frame: buf})
	_, head, _ := im.line.Peek()
	first := head.seq == v.seq
	im.mu.Unlock()
	if first {
		select {
		case im.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return nil
}

// run is the delay line: it sleeps until the first frame is due, sends it,
// and repeats until Close.
func (im *Impair) run() {
	defer close(im.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		im.mu.Lock()
		_, head, ok := im.line.Peek()
		if !ok {
			im.mu.Unlock()
			select {
			case <-im.wake:
				continue
			case <-im.done:
				return
			}
		}
		wait := head.at.Sub(im.now())
		if wait <= 0 {
			_, d := im.line.Pop()
			im.mu.Unlock()
			// Errors are counted in the wrapped link's Stats.TxErrors;
			// there is no caller left to return them to.
			_ = im.link.WriteFrame(d.frame)
			im.mu.Lock()
			im.free = append(im.free, d.frame)
			im.mu.Unlock()
			continue
		}
		im.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-im.wake: // an earlier frame arrived (reordered)
			timer.Stop()
		case <-im.done:
			return
		}
	}
}

// Close implements Link. It stops the delay line (queued frames are
// discarded) and closes the wrapped link.
func (im *Impair) Close() error {
	var err error
	im.closeOnce.Do(func() {
		im.closed.Store(true)
		close(im.done)
		// Closing the link first unblocks a write the goroutine may be in.
		err = im.link.Close()
		<-im.stopped
	})
	return err
}

// Name implements Link; it is the wrapped link's name.
func (im *Impair) Name() string { return im.link.Name() }

// Stats implements Link: the wrapped link's counters, with frames the
// impairment dropped added to TxDropped.
func (im *Impair) Stats() Stats {
	s := im.link.Stats()
	s.TxDropped += im.lost.Load() + im.overflowed.Load()
	return s
}

// ImpairStats returns the impairment's own counters.
func (im *Impair) ImpairStats() ImpairStats {
	im.mu.Lock()
	queued := im.line.Len()
	im.mu.Unlock()
	return ImpairStats{
		Lost:       im.lost.Load(),
		Reordered:  im.reordered.Load(),
		Overflowed: im.overflowed.Load(),
		Queued:     queued,
	}
}

// impairSchedule takes the per-frame decisions. It is pure: given the seed
// and the (time, size) of each frame written, it returns the same verdicts,
// which is what the tests check instead of wall-clock timing.
type impairSchedule struct {
	cfg        ImpairConfig
	rng        *rand.Rand
	seq        uint64
	lineFree   time.Time // when the rate limiter finishes the last frame
	lastDepart time.Time // departure of the last in-order frame
}

// impairVerdict is the fate of one frame.
type impairVerdict struct {
	seq       uint64 // write order, ties departures
	drop      bool
	reordered bool
	depart    time.Time
}

func newImpairSchedule(cfg ImpairConfig) impairSchedule {
	return impairSchedule{
		cfg: cfg,
		// The second PCG word is a fixed odd constant so that Seed alone
		// determines the stream.
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
	}
}

// admit decides the fate of a frame of size bytes written at now. It always
// draws three numbers, so the n-th frame's decisions do not depend on the
// fate of earlier frames or on the configuration of other knobs.
func (s *impairSchedule) admit(now time.Time, size int) impairVerdict {
	uLoss, uReorder, uJitter := s.rng.Float64(), s.rng.Float64(), s.rng.Float64()
	s.seq++
	v := impairVerdict{seq: s.seq}
	if uLoss < s.cfg.Loss {
		v.drop = true
		return v
	}
	if uReorder < s.cfg.Reorder {
		v.reordered = true
		v.depart = now
		return v
	}
	sent := now
	if rate := s.cfg.RateBitsPerSec; rate > 0 {
		if s.lineFree.After(sent) {
			sent = s.lineFree
		}
		sent = sent.Add(time.Duration(int64(size) * 8 * int64(time.Second) / rate))
		s.lineFree = sent
	}
	delay := s.cfg.Delay + time.Duration((2*uJitter-1)*float64(s.cfg.Jitter))
	if delay < 0 {
		delay = 0
	}
	v.depart = sent.Add(delay)
	if v.depart.Before(s.lastDepart) {
		v.depart = s.lastDepart
	}
	s.lastDepart = v.depart
	return v
}

// departure is a frame waiting in the delay line.
type departure struct {
	at    time.Time
	seq   uint64
	frame []byte
}

// queueDeparture puts d in the delay line. Frames are pushed in write
// order (WriteFrame holds the lock from the verdict to the push), so
// frames due at the same time leave in write order.
func (im *Impair) queueDeparture(d departure) { im.line.Push(d.at.Sub(im.epoch), d) }

// String describes the configuration for logs.
func (c ImpairConfig) String() string {
	return fmt.Sprintf("delay=%v jitter=%v loss=%g reorder=%g rate=%dbit/s seed=%d limit=%d",
		c.Delay, c.Jitter, c.Loss, c.Reorder, c.RateBitsPerSec, c.Seed, c.QueueLimit)
}
