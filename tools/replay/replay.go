package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// maxTicksAtOneTime bounds how often the engine's deadline may come due at
// the same instant without the loop moving on; more means the engine keeps
// re-arming a timer for now, which would otherwise spin forever.
const maxTicksAtOneTime = 10000

// replayer is the state of one Run.
type replayer struct {
	cfg      Config
	fe       *splice.FrontEnd
	out      splice.Output
	pcap     *link.PcapWriter
	now      splice.Time
	queue    actionQueue
	rw       *rewriter
	backends []*simBackend // index k-1 is back-end k
	byIP     map[wire.IP4]*simBackend
	nextRR   int
	handoff  wire.IP4
	vip      wire.IP4
	pkt      wire.Packet // a capture frame being handled
	outPkt   wire.Packet // an engine frame being routed
	sum      Summary
	err      error // first error writing the output
}

// Run replays the pcap in through a front-end engine configured by cfg
// and writes the frames the engine and the simulated back-ends sent to out
// as a pcap (nanosecond timestamps of engine time). Run buffers its writes
// to out and flushes them before returning.
func Run(cfg Config, in io.Reader, out io.Writer) (Summary, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Summary{}, err
	}
	fe, err := splice.NewFrontEnd(cfg.engineConfig())
	if err != nil {
		return Summary{}, fmt.Errorf("replay: %w", err)
	}
	pr, err := link.NewPcapReader(in)
	if err != nil {
		return Summary{}, fmt.Errorf("replay: input: %w", err)
	}
	bw := bufio.NewWriterSize(out, 256<<10)
	pw, err := link.NewPcapWriter(bw)
	if err != nil {
		return Summary{}, fmt.Errorf("replay: output: %w", err)
	}
	r := &replayer{
		cfg: cfg, fe: fe, pcap: pw, rw: newRewriter(),
		byIP:    make(map[wire.IP4]*simBackend),
		handoff: wire.IP4From(cfg.HandoffAddr),
		vip:     wire.IP4From(cfg.VIP),
		sum:     newSummary(),
	}
	for k := 1; k <= cfg.Backends; k++ {
		b := newSimBackend(k, &r.cfg, &r.queue)
		r.backends = append(r.backends, b)
		r.byIP[b.ip] = b
	}
	err = r.loop(pr)
	r.sum.finish(fe.Stats())
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("replay: output: %w", ferr)
	}
	return r.sum, err
}

// loop is the discrete-event loop: at each step it runs the earliest of
// the next scheduled action, the engine's next deadline and the next
// capture frame (ties in that order).
func (r *replayer) loop(pr *link.PcapReader) error {
	var (
		inTime  splice.Time
		inFrame []byte
		have    bool // inFrame is read and not yet processed
		eof     bool
		end     = splice.Never // last time to run after the capture ends
		ticks   int
		tickAt  splice.Time
	)
	for r.err == nil {
		if !have && !eof {
			t, frame, err := pr.Next()
			switch {
			case errors.Is(err, io.EOF):
				eof = true
				if r.cfg.Drain >= 0 {
					end = r.now.Add(r.cfg.Drain)
				}
			case err != nil:
				return fmt.Errorf("replay: input: %w", err)
			default:
				inTime, inFrame, have = splice.Time(t.UnixNano()), frame, true
			}
		}
		tIn := splice.Never
		if have {
			tIn = inTime
		}
		tAct, tDl := r.queue.next(), r.fe.NextDeadline()
		next := min(tIn, tAct, tDl)
		if next == splice.Never || eof && end < next {
			break
		}
		switch {
		case tAct == next:
			r.advance(tAct)
			r.runAction(r.queue.pop())
		case tDl == next:
			r.advance(tDl)
			if tDl == tickAt {
				if ticks++; ticks > maxTicksAtOneTime {
					return fmt.Errorf("replay: engine deadline stuck at %d ns", tDl)
				}
			} else {
				tickAt, ticks = tDl, 0
			}
			r.engine(func(out *splice.Output) { r.fe.Tick(r.now, out) })
		default:
			r.advance(inTime)
			r.input(inFrame)
			have = false
		}
	}
	return r.err
}

// advance moves engine time to t unless t is in the past (a capture
// stamped out of order is fed late rather than rewinding the engine).
func (r *replayer) advance(t splice.Time) {
	if t > r.now {
		r.now = t
	}
	if r.sum.StartNS == 0 {
		r.sum.StartNS = int64(r.now)
	}
	r.sum.EndNS = int64(r.now)
}

// input handles one capture frame.
func (r *replayer) input(frame []byte) {
	r.sum.FramesIn++
	p := &r.pkt
	if err := wire.Parse(frame, p); err != nil {
		if !r.toVIP(frame) {
			r.sum.FramesIgnored++
			return
		}
		// Addressed to the VIP but broken: the engine counts it.
		r.feed(frame)
		return
	}
	switch p.Kind {
	case wire.KindARP:
		r.feed(frame)
		return
	case wire.KindOther:
		r.sum.FramesIgnored++
		return
	}
	if p.IP.Src() == r.vip && p.Kind == wire.KindTCP {
		r.rw.capturedSynAck(p) // the old front-end's answer: learn, do not feed
	}
	if p.IP.Dst() != r.vip {
		r.sum.FramesIgnored++
		return
	}
	if p.Kind == wire.KindTCP {
		switch r.rw.clientFrame(p) {
		case rewroteShifted:
			r.sum.ClientRewritten++
		case rewroteUnmapped:
			r.sum.ClientUnmapped++
		}
		if r.cfg.RecomputeChecksums {
			recomputeChecksums(p)
		}
	}
	r.feed(frame[:p.End])
}

// toVIP reports whether an unparsable frame is IPv4 addressed to the VIP.
func (r *replayer) toVIP(frame []byte) bool {
	const dstOff = wire.EthernetHeaderLen + 16
	return len(frame) >= dstOff+4 && wire.Ethernet(frame).EtherType() == wire.EtherTypeIPv4 &&
		wire.IP4(frame[dstOff:dstOff+4]) == r.vip
}

// feed gives a client frame to the engine.
func (r *replayer) feed(frame []byte) {
	r.sum.FramesFed++
	if r.cfg.RecordInput {
		r.record(frame)
	}
	r.engine(func(out *splice.Output) { r.fe.Input(frame, r.now, out) })
}

// runAction performs a scheduled action at r.now.
func (r *replayer) runAction(a action) {
	switch a.kind {
	case actBackendFrame:
		r.fromBackend(a.frame)
	case actBackendAck:
		if frame := r.backends[a.backend-1].sendDelayedAck(a.port, r.now); frame != nil {
			r.fromBackend(frame)
		}
	case actSpliceAck:
		r.engine(func(out *splice.Output) {
			if err := r.fe.SpliceAcked(a.flow, r.now, out); err != nil {
				r.sum.SpliceAckErrors++ // the flow ended meanwhile
			}
		})
	}
}

// fromBackend records a simulated back-end's frame and feeds it to the
// engine.
func (r *replayer) fromBackend(frame []byte) {
	r.sum.BackendFrames++
	r.record(frame)
	r.engine(func(out *splice.Output) { r.fe.Input(frame, r.now, out) })
}

// engine makes one call into the engine, records and routes the frames it
// produced, then reacts to its events as the daemon would.
func (r *replayer) engine(call func(out *splice.Output)) {
	out := &r.out
	out.Reset()
	call(out)
	for _, f := range out.Frames {
		r.emitted(f.Data)
	}
	if len(out.Events) == 0 {
		return
	}
	// Reactions call into the engine again, which resets out.
	events := append([]splice.Event(nil), out.Events...)
	for i := range events {
		r.event(&events[i])
	}
}

// emitted handles a frame the engine sent: into the output capture, and to
// a simulated back-end if it is for one.
func (r *replayer) emitted(frame []byte) {
	r.sum.FramesOut++
	r.record(frame)
	p := &r.outPkt
	if wire.Parse(frame, p) != nil || p.Kind != wire.KindTCP {
		return
	}
	switch src := p.IP.Src(); {
	case src == r.vip:
		r.rw.engineSynAck(p)
	case src == r.handoff:
		if b := r.byIP[p.IP.Dst()]; b != nil {
			b.receive(frame, r.now)
		}
	}
}

// event plays the daemon's part for one engine event.
func (r *replayer) event(ev *splice.Event) {
	switch ev.Kind {
	case splice.EvRequest:
		b := r.backends[r.nextRR]
		r.nextRR = (r.nextRR + 1) % len(r.backends)
		r.engine(func(out *splice.Output) {
			if err := r.fe.Dispatch(ev.Flow, b.backend(), r.now, out); err != nil {
				r.sum.DispatchErrors++
			}
		})
	case splice.EvSplice:
		r.queue.push(action{when: r.now.Add(r.cfg.ControlDelay), kind: actSpliceAck, flow: ev.Flow})
	case splice.EvAnswered:
		r.sum.Answers[fmt.Sprint(ev.Status)]++
	case splice.EvClosed:
		r.sum.Closed[ev.Reason.String()]++
	}
}

// record writes a frame to the output capture stamped with engine time.
func (r *replayer) record(frame []byte) {
	if r.err != nil {
		return
	}
	if err := r.pcap.WriteFrame(time.Unix(0, int64(r.now)), frame); err != nil {
		r.err = fmt.Errorf("replay: output: %w", err)
	}
}
