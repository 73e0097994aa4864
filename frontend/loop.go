package frontend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
	"github.com/qsplice/qsplice/splice/wire"
)

// The event loop. One goroutine owns the engine and the controller and
// sleeps in a link.Poller until
//
//   - the link is readable: a BatchLink (AF_PACKET) is drained by the
//     loop itself, one recvmmsg(2) per pass, with no goroutine hand-off;
//   - the control socket is readable: the loop reads the datagrams
//     waiting with one recvmmsg(2) and hands them to the controller in
//     the same pass (control.go);
//   - another goroutine woke it (Poller.Wake): an admin request, SIGHUP,
//     the end of ctx, or a frame from the pump that reads a link which is
//     not a BatchLink (water's TAP, a capture Recorder, the in-memory
//     link of tests);
//   - the earliest deadline of the engine and the controller passed.
//
// There is no fixed ticker: an idle front-end does not wake.

// Poller tokens of the loop's descriptors.
const (
	tokLink    uint32 = iota // a BatchLink
	tokControl               // the control socket
)

// yieldEvery is how often the busy loop passes through the Go scheduler:
// a goroutine that never does is treated by the runtime as running too
// long, and its P is taken away whenever it is in a system call (see
// backend's yieldEvery).
const yieldEvery = 5 * time.Millisecond

// maxDrain bounds the frames one pass takes from the link before it
// writes what they produced.
const maxDrain = 64

// scratchSize holds the MTU-sized segments of the GRO'd super-frames one
// pass can carry: client request data coalesced by the kernel, rare and
// at most a few per pass. A super-frame that does not fit is dropped and
// counted (the client retransmits it).
const scratchSize = 1 << 20

// Run serves until ctx ends or the link fails.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.poller.Close()
	defer d.link.Close()
	defer d.ctl.Close()
	if d.adminLn != nil {
		defer d.serveAdmin().Close() // closes the listener too
	}
	done := make(chan struct{})
	defer close(done)
	wake := func() { d.poller.Wake() }
	if err := d.poller.Add(d.ctl.sock.FD(), tokControl); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			wake()
		case <-done:
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
					wake()
				case <-done:
					return
				}
			}
		}()
	}
	var frames *pump.Pump
	bl, batched := d.link.(link.BatchLink)
	if batched {
		size := 2048
		if bl.VNetHdr() {
			size = link.MaxFrame
			d.scratch = make([]byte, scratchSize)
		}
		d.rb = link.NewBatch(maxDrain, size)
		if err := d.poller.Add(bl.FD(), tokLink); err != nil {
			return fmt.Errorf("frontend: %w", err)
		}
	} else {
		frames = pump.Start(d.link, 0, 256, 2048, wake)
	}
	d.log.Info("front-end up", "link", d.cfg.Link, "mac", d.cfg.MAC.String(), "vips", d.cfg.VIPs,
		"handoff", d.cfg.Handoff, "ports", d.cfg.Ports, "control", d.cfg.Control,
		"batched", batched, "vnet", batched && bl.VNetHdr())
	var ready [4]uint32
	var nextYield splice.Time
	for {
		n, err := d.poller.Wait(d.timeout(), ready[:])
		if err != nil {
			return fmt.Errorf("frontend: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		now := d.now()
		if now >= nextYield {
			// Let the scheduler see the loop run now and then:
			// backend.yieldEvery says why.
			runtime.Gosched()
			nextYield = now.Add(yieldEvery)
		}
		d.rxBatch, d.rxVNet = d.rxBatch[:0], d.rxVNet[:0]
		control := false
		for _, tok := range ready[:n] {
			switch tok {
			case tokLink:
				if err := d.readBatch(bl); err != nil {
					return err
				}
			case tokControl:
				control = true
			}
		}
		if frames != nil {
			if err := d.takePumped(frames); err != nil {
				return err
			}
		}
		d.pass(d.rxBatch, d.rxVNet, control, now)
		clear(d.rxBatch)
		for i, f := range d.inBatch {
			f.Release()
			d.inBatch[i] = nil
		}
		d.inBatch = d.inBatch[:0]
		d.mail()
	}
}

// timeout is how long the loop may sleep: until the earlier of the
// engine's and the controller's deadlines, or for ever.
func (d *Daemon) timeout() time.Duration {
	next := min(d.engine.NextDeadline(), d.ctrl.NextDeadline())
	if next == splice.Never {
		return -1
	}
	return max(time.Duration(next-d.now()), 0)
}

// readBatch reads the frames waiting on a BatchLink into the pass. A GRO'd
// super-frame is cut into MTU-sized segments first (wire.SegmentTCP4),
// because the engine validates and rewrites ordinary segments only. The
// client's side carries requests and ACKs, so this is rare and cheap.
// Each frame's virtio-net header goes with it (rxVNet): the engine
// completes a partial checksum itself, and the kernel's DATA_VALID, or
// DATA_VALID for the segments cut here (right by construction), spares it
// verifying the TCP checksum again (splice/ingress.go).
func (d *Daemon) readBatch(bl link.BatchLink) error {
	n, err := bl.ReadBatch(d.rb)
	if err != nil {
		return fmt.Errorf("frontend: link %s: %w", bl.Name(), err)
	}
	used := 0
	for i := 0; i < n; i++ {
		f, h := d.rb.Frame(i), d.rb.VNet[i]
		if !h.IsGSO() {
			d.rxBatch, d.rxVNet = append(d.rxBatch, f), append(d.rxVNet, h)
			continue
		}
		_, size, err := wire.SegmentTCP4Len(f, h)
		if err == nil && used+size > len(d.scratch) {
			err = errScratchFull
		}
		if err == nil {
			d.rxBatch, err = wire.SegmentTCP4(f, h, d.scratch[used:used+size], d.rxBatch)
		}
		if err != nil {
			d.vnetRefused++
			if d.vnetRefused < 10 || d.vnetRefused%1000 == 0 {
				d.log.Warn("frame with a virtio-net header dropped", "err", err, "len", len(f), "gso_type", h.GSOType, "count", d.vnetRefused)
			}
			continue
		}
		used += size
		for len(d.rxVNet) < len(d.rxBatch) {
			d.rxVNet = append(d.rxVNet, wire.VNetHdr{Flags: wire.VNetFlagDataValid})
		}
	}
	return nil
}

var errScratchFull = errors.New("no room left this pass for the segments of a super-frame")

// takePumped takes what the pump has read into the pass (the fallback for
// links that are not a BatchLink).
func (d *Daemon) takePumped(frames *pump.Pump) error {
	for len(d.inBatch) < maxDrain {
		select {
		case f, ok := <-frames.C:
			if !ok {
				return fmt.Errorf("frontend: link %s: %w", d.link.Name(), frames.Err())
			}
			d.inBatch = append(d.inBatch, f)
			d.rxBatch, d.rxVNet = append(d.rxBatch, f.Data), append(d.rxVNet, wire.VNetHdr{})
		default:
			return nil
		}
	}
	if len(frames.C) > 0 {
		d.poller.Wake() // more than one pass's worth: come back at once
	}
	return nil
}

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
