package frontend

import (
	"context"
	"fmt"
	"time"

	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"golang.org/x/sys/unix"
)

// Gathering: one loop serves every shard while one core is enough
// (issue 7; the policy is internal/gather's).
//
// Each shard has a loop of its own, so that a front-end with more
// traffic than one core can take uses them all. While the traffic fits
// in one core, the other loops only cost: each wakes for its own share
// of the frames, every wake-up a context switch and a wait's system
// call, and under bulk load each loop's moderation hold gathers half the
// client ACKs one loop's would. Measured on the 2-core development
// machine (docs/results.md): with one connection per request the
// front-end spent 54 us of CPU per request with one loop against 71-76
// with two, for the same 8.6 frames; under bulk load it made 0.1 system
// calls per frame against 0.2-0.3.
//
// So shard 0's loop measures how busy the loops are (the wall time from
// the end of a wait to the end of its pass, summed over the loops) and,
// while that stays under Below of one core over a window, gathers: the
// other loops hand their shards over and park, and shard 0's loop serves
// them all, their links readable through one epoll instance it watches.
// Once that loop is busy for more than Above of the window, it hands the
// shards back. Nothing else changes: each shard keeps its engine, its
// socket and its lock, the fanout still steers each flow to its shard,
// and the controller still reaches an engine through its lock. A shard
// is served by one loop at a time, handed over through a channel, so
// the pass's buffers keep one owner.
//
// The handover keeps the order of each flow's frames: a loop that parks
// sends the frames it queued for its next wait first, and shard 0's loop
// sends those of the shards it gives back before they go. The
// controller wakes the loop that serves a shard now (shard.wakeP).

// tokGather is the poller token of the epoll instance watching the
// links of the shards shard 0's loop has gathered.
const tokGather = tokControl + 1

// gathering is the daemon's side of it, all but want and handed
// touched by shard 0's loop only.
type gathering struct {
	*gather.Handover[*shard]
	// epfd watches the links of the shards gathered (tokGather).
	epfd int
}

// startGathering sets gathering up for a daemon of more than one shard,
// each on a link read in batches; otherwise the daemon runs without.
func (d *Daemon) startGathering() error {
	if !d.cfg.Gather.On() || len(d.shards) < 2 {
		return nil
	}
	for _, s := range d.shards {
		if s.rb == nil {
			return nil
		}
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("frontend: gathering: epoll_create1: %w", err)
	}
	if err := d.shards[0].poller.AddHeld(epfd, tokGather); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("frontend: gathering: %w", err)
	}
	g := &gathering{Handover: gather.NewHandover[*shard](d.cfg.Gather, d.clock(), len(d.shards)), epfd: epfd}
	for _, s := range d.shards[1:] {
		s.resume = make(chan struct{}, 1)
	}
	d.gather = g
	return nil
}

// stopGathering releases its epoll instance, once the loops have ended.
func (d *Daemon) stopGathering() {
	if d.gather != nil {
		unix.Close(d.gather.epfd)
	}
}

// loopPoller is the poller of the loop serving s now: the one to wake
// for it.
func (s *shard) loopPoller() *link.Poller { return s.wakeP.Load() }

// park hands s over to shard 0's loop and waits until it comes back; it
// reports false when the daemon stops meanwhile. Called by s's loop
// before a wait, when the loops gather.
func (s *shard) park(ctx context.Context) bool {
	g, s0 := s.d.gather, s.d.shards[0]
	if s.sendInWait {
		// What the last pass queued for this loop's next wait leaves
		// now, ahead of anything shard 0's loop sends for the shard.
		if err := s.ringLink.FlushQueued(); err != nil {
			s.writeFailed(1, err)
		}
	}
	s.wakeP.Store(s0.poller)
	g.Hand(s)
	s0.poller.Wake()
	select {
	case <-s.resume:
	case <-ctx.Done():
		return false
	}
	s.wakeP.Store(s.poller)
	return true
}

// gatherStep runs at the end of each of shard 0's passes: it takes the
// busy time of the pass, asks the policy, and gathers or spreads.
func (s *shard) gatherStep(now splice.Time) error {
	g := s.d.gather
	var busy time.Duration
	for _, o := range s.d.shards {
		busy += time.Duration(o.busy.Load())
	}
	want, gathering := g.Decide(now, busy)
	if gathering {
		for _, o := range s.d.shards[1:] {
			o.poller.Wake() // to see it before its next wait
		}
	}
	for o, ok := g.Take(); ok; o, ok = g.Take() {
		if err := s.adopt(o); err != nil {
			return err
		}
	}
	if !want && len(s.adopted) > 0 {
		return s.giveBack()
	}
	return nil
}

// adopt makes shard 0's loop serve o: o's link joins the gathering's
// epoll instance and o's frames go out with shard 0's.
func (s *shard) adopt(o *shard) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(o.idx)}
	if err := unix.EpollCtl(s.d.gather.epfd, unix.EPOLL_CTL_ADD, o.bl.FD(), &ev); err != nil {
		return fmt.Errorf("frontend: gathering shard %d: %w", o.idx, err)
	}
	o.ownSend, o.ownRing = o.sendInWait, o.ringLink
	o.sendInWait, o.ringLink = s.sendInWait, s.ringLink
	if len(s.adopted) == 0 {
		s.mods = append(s.mods[:0], &s.mod)
	}
	s.adopted = append(s.adopted, o)
	s.mods = append(s.mods, &o.mod)
	return nil
}

// giveBack hands every gathered shard back to its own loop, after the
// frames queued for shard 0's next wait (theirs among them) have left.
func (s *shard) giveBack() error {
	if s.sendInWait {
		if err := s.ringLink.FlushQueued(); err != nil {
			s.writeFailed(1, err)
		}
	}
	for _, o := range s.adopted {
		if err := unix.EpollCtl(s.d.gather.epfd, unix.EPOLL_CTL_DEL, o.bl.FD(), nil); err != nil {
			return fmt.Errorf("frontend: spreading shard %d: %w", o.idx, err)
		}
		o.sendInWait, o.ringLink = o.ownSend, o.ownRing
		o.resume <- struct{}{}
	}
	clear(s.adopted)
	s.adopted = s.adopted[:0]
	clear(s.mods)
	s.mods = s.mods[:0]
	return nil
}
