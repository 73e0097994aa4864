package frontend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/rxmod"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
)

// The event loops. Each shard (shard.go) has a goroutine that owns its
// engine's input and sleeps in its link.Poller until
//
//   - its link is readable: a BatchLink (AF_PACKET) is drained by the
//     loop itself, one recvmmsg(2) per pass, with no goroutine hand-off;
//   - (shard 0) its ARP socket is readable, when the link hides the
//     SYNs the kernel answered (synhide.go);
//   - (shard 0) the control socket is readable: the loop reads the
//     datagrams waiting with one recvmmsg(2) and hands them to the
//     controller in the same pass (control.go);
//   - another goroutine woke it (Poller.Wake): the controller changed its
//     engine from another shard; (shard 0) an admin request, SIGHUP, the
//     end of ctx, or a frame from the pump that reads a link which is
//     not a BatchLink (water's TAP, a capture Recorder, the in-memory
//     link of tests);
//   - the earliest deadline of its engine or of the controller passed
//     (whichever shard wakes first runs the controller's due timers).
//
// There is no fixed ticker: an idle front-end does not wake.

// Poller tokens of the loop's descriptors.
const (
	tokLink    uint32 = iota // a BatchLink
	tokControl               // the control socket
)

// yieldEvery is how often the busy loop passes through the Go scheduler:
// a goroutine that never does is, after 10 ms, treated by the runtime as
// running too long (see backend's yieldEvery) and preempted. Each
// Gosched costs two futex(2) calls while the spare P is idle
// (spareProcessor): the runtime starts an M to look for work and puts it
// back to sleep. 8 ms stays under the 10 ms with a pass or a hold (2 ms)
// to spare; 5 ms made 400 yields a second for two loops.
const yieldEvery = 8 * time.Millisecond

// maxDrain bounds the frames one pass takes from the link before it
// writes what they produced.
const maxDrain = 64

// scratchSize holds the MTU-sized segments of the GRO'd super-frames one
// pass can carry: client request data coalesced by the kernel, rare and
// at most a few per pass. A super-frame that does not fit is dropped and
// counted (the client retransmits it).
const scratchSize = 1 << 20

// Run serves until ctx ends or a link fails.
func (d *Daemon) Run(ctx context.Context) error {
	defer func() {
		for _, s := range d.shards {
			s.poller.Close()
			s.link.Close()
			if s.arp != nil {
				s.arp.Close()
			}
		}
		d.syna.close() // after the sockets: none reads a SYN it did not see
	}()
	defer d.ctl.Close()
	defer d.closeTimelines()
	if d.adminLn != nil {
		defer d.serveAdmin().Close() // closes the listener too
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := d.shards[0].poller.Add(d.ctl.sock.FD(), tokControl); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	if a := d.shards[0].arp; a != nil {
		if err := d.shards[0].poller.Add(a.FD(), tokARP); err != nil {
			return fmt.Errorf("frontend: %w", err)
		}
	}
	go func() {
		<-ctx.Done()
		for _, s := range d.shards {
			s.poller.Wake()
		}
	}()
	if d.cfg.ConfigPath != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-hup:
					d.hup.Store(true)
					d.shards[0].poller.Wake()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for _, s := range d.shards {
		if err := s.open(); err != nil {
			return err
		}
	}
	if err := d.startGathering(); err != nil {
		return err
	}
	defer d.stopGathering()
	spareProcessor(len(d.shards))
	s0 := d.shards[0]
	bl, batched := s0.link.(link.BatchLink)
	d.log.Info("front-end up", "link", d.cfg.Link, "mac", d.cfg.MAC.String(), "vips", d.cfg.VIPs,
		"handoff", d.cfg.Handoff, "ports", d.cfg.Ports, "control", d.cfg.Control,
		"workers", len(d.shards), "batched", batched, "vnet", batched && bl.VNetHdr())
	if !d.linkCtl.on() {
		d.log.Info("Splices go through the control socket", "reason", d.linkCtlOff)
	}
	// Shards 1..n-1 on goroutines of their own, shard 0 here; the first
	// to fail ends them all.
	errs := make(chan error, len(d.shards))
	var wg sync.WaitGroup
	for _, s := range d.shards[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.run(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	err := s0.run(ctx)
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// open prepares the shard's loop: its link's descriptor in its poller,
// or a pump for a link that is not a BatchLink.
func (s *shard) open() error {
	bl, batched := s.link.(link.BatchLink)
	if !batched {
		s.frames = pump.Start(s.link, 0, 256, 2048, func() { s.poller.Wake() })
		return nil
	}
	size := 2048
	if bl.VNetHdr() {
		size = link.MaxFrame
		s.scratch = make([]byte, scratchSize)
	}
	s.rb = link.NewBatch(maxDrain, size)
	s.bl = bl
	// The link is the one descriptor a receive-moderation hold does not
	// watch (moderate.go).
	s.mod = newRxModerator(s.d.cfg.moderation())
	if err := s.poller.AddHeld(bl.FD(), tokLink); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	if mode := s.d.cfg.RingWait; mode == RingWaitHolds || mode == RingWaitAll {
		s.ringWait(mode == RingWaitAll)
	}
	return nil
}

// ringWait makes the shard's loop hold (all: and wait) in io_uring and
// send its frames in the next hold's io_uring_enter, or with sendmmsg
// before a wait in epoll (Config.RingWait), where the link and the
// kernel allow; otherwise it says why and the loop waits as before.
func (s *shard) ringWait(all bool) {
	a, ok := s.link.(*link.AFPacket) // not behind a capture: it must see every frame
	if !ok {
		s.d.log.Info("waiting in epoll: only a plain afpacket link sends in the wait", "shard", s.idx, "link", s.link.Name())
		return
	}
	err := s.poller.HoldInRing()
	if err == nil && all {
		err = s.poller.WaitInRing()
	}
	if err == nil {
		err = s.poller.SendWith(a)
	}
	if err != nil {
		s.d.log.Info("waiting in epoll", "shard", s.idx, "reason", err)
		return
	}
	s.sendInWait, s.ringLink = true, a
}

// run is a shard's loop.
func (s *shard) run(ctx context.Context) error {
	d := s.d
	bl := s.bl
	var ready [4]uint32
	var nextYield splice.Time
	for {
		if d.gather != nil && s.idx != 0 && d.gather.Want() && !s.park(ctx) {
			return nil
		}
		n, held, err := s.wait(ready[:])
		if err != nil {
			return fmt.Errorf("frontend: %w", err)
		}
		if s.sendInWait {
			// The last pass's frames went in the wait: count what failed.
			if err, failed := s.ringLink.TakeSendError(); failed > 0 {
				s.writeFailed(failed, err)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		awake := d.clock()
		if awake >= nextYield {
			// Let the scheduler see the loop run now and then:
			// backend.yieldEvery says why.
			runtime.Gosched()
			nextYield = awake.Add(yieldEvery)
		}
		// A hold does not report the links: read them anyway, they are
		// what the hold waited for.
		control, own, gathered, arp := false, held, held, false
		for _, tok := range ready[:n] {
			switch tok {
			case tokLink:
				own = true
			case tokControl:
				control = true
			case tokGather:
				gathered = true
			case tokARP:
				arp = true
			}
		}
		if own {
			if err := s.readBatch(bl); err != nil {
				return err
			}
		}
		if arp {
			if err := s.readARP(); err != nil {
				return err
			}
		}
		if s.frames != nil {
			if err := s.takePumped(); err != nil {
				return err
			}
		}
		s.passes.Add(1)
		s.pass(control)
		s.observeReceived()
		s.releasePass()
		for _, o := range s.adopted {
			// A gathered shard's turn (gather.go): its link if it may
			// have frames, its timers and the controller's always.
			if gathered {
				if err := o.readBatch(o.bl); err != nil {
					return err
				}
			}
			o.passes.Add(1)
			o.pass(false)
			o.observeReceived()
			o.releasePass()
		}
		if s.idx == 0 {
			d.mail()
		}
		done := d.clock()
		s.busy.Add(int64(done - awake))
		if d.gather != nil && s.idx == 0 {
			if err := s.gatherStep(done); err != nil {
				return err
			}
		}
	}
}

// wait sleeps until the shard's loop has work: normally until the link
// or another descriptor is readable, a Wake or the shard's deadline;
// under a steady stream of pure ACKs for a short hold first (moderate.go),
// which only a Wake, a control datagram or the deadline ends early. held
// reports a hold: the link is then to be read although no token says so.
func (s *shard) wait(ready []uint32) (n int, held bool, err error) {
	timeout := s.timeout()
	// A pass that filled its batch left frames behind: no hold before
	// the next, or a backlog could build up one batch per hold.
	if hold := s.holdFor(s.d.clock()); hold > 0 && s.rb != nil {
		if timeout >= 0 {
			hold = min(hold, timeout)
		}
		s.holds.Add(1)
		n, err = s.poller.Hold(hold, ready)
		return n, true, err
	}
	n, err = s.poller.Wait(timeout, ready)
	return n, false, err
}

// holdFor is how long the loop may hold before its next pass: none if a
// shard it serves filled its batch (frames are left), else what the
// moderators of the shards it serves call for together (gather.go).
func (s *shard) holdFor(now splice.Time) time.Duration {
	if s.batchFull {
		return 0
	}
	if len(s.adopted) == 0 {
		return s.mod.Hold(now)
	}
	for _, o := range s.adopted {
		if o.batchFull {
			return 0
		}
	}
	return rxmod.Joint(now, s.mods)
}

// observeReceived tells the moderator what the pass received. A pure
// ACK advertising a narrow window counts as urgent: its sender waits on
// it (moderate.go).
func (s *shard) observeReceived() {
	narrow := min(s.rxNarrow, s.rxAcks)
	s.mod.Observe(s.d.clock(), s.rxAcks-narrow, s.rxOther+narrow)
	s.rxAcks, s.rxOther, s.rxNarrow = 0, 0, 0
}

// timeout is how long the shard's loop may sleep: until its engine's
// deadline or the controller's (shard.sleep), or for ever.
func (s *shard) timeout() time.Duration {
	next := s.sleep()
	for _, o := range s.adopted {
		next = min(next, o.sleep())
	}
	if next == splice.Never {
		return -1
	}
	return max(time.Duration(next-s.d.clock()), 0)
}

// spareProcessor gives the Go runtime one processor (P) more than the
// shards' loops, unless it has that many already. The loops spend their
// idle time blocked in epoll_wait(2) (or a moderation hold); when every P
// is in a system call and none is idle, the runtime's sysmon takes the
// Ps away from the blocked loops after 20 us (retake), re-arms itself at
// its shortest period, and each loop's return from the call then has to
// find a P again. Measured under bulk load with two shards on two CPUs:
// GOMAXPROCS 2 made 1,900 nanosleep(2) calls a second (sysmon) against
// 240-450 with 3, a third of the front-end's system calls. The spare P
// costs nothing while idle; it lets the runtime's own work (GC, the
// admin server) run without taking a loop's P.
func spareProcessor(loops int) {
	if runtime.GOMAXPROCS(0) <= loops {
		runtime.GOMAXPROCS(loops + 1)
	}
}

var errScratchFull = errors.New("no room left this pass for the segments of a super-frame")

// mail handles what other goroutines handed the loop: admin requests and
// a pending reload.
func (d *Daemon) mail() {
	for {
		select {
		case reply := <-d.adminReq:
			reply <- d.status()
			continue
		default:
		}
		break
	}
	if d.hup.Swap(false) {
		d.reload()
	}
}
