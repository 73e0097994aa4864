package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// maxTicksAtOneTime bounds how often the engine's deadline may come due at
// the same instant without the loop moving on; more means the engine keeps
// re-arming a timer for now, which would otherwise spin forever.
const maxTicksAtOneTime = 10000

// ErrNothingFed: no IPv4 frame of the capture was for the VIP (another
// VIP, or not an Ethernet capture of client traffic).
var ErrNothingFed = errors.New("no frame of the capture reached the engine")

// replayer is the state of one Run.
type replayer struct {
	cfg       Config
	fe        *splice.FrontEnd
	ctrl      *controller.Controller
	out       controller.Output
	pcap      *link.PcapWriter
	now       splice.Time
	queue     actionQueue
	rw        *rewriter
	backends  []*simBackend // index k-1 is back-end k
	byIP      map[wire.IP4]*simBackend
	c2        map[splice.FlowID]c2Ref // from the Splice messages: where each flow went
	started   bool                    // the back-ends have registered
	vipFrames uint64                  // IPv4 frames to the VIP fed
	handoff   wire.IP4
	vip       wire.IP4
	pkt       wire.Packet // a capture frame being handled
	outPkt    wire.Packet // an engine frame being routed
	sum       Summary
	err       error // first error writing the output

	// Handoff timelines (timeline.go), with Config.Timeline.
	tlBuf []byte
	tlErr error
}

// c2Ref is a flow's handoff connection: back-end k, from handoff port.
type c2Ref struct {
	k    int
	port uint16
}

// Run replays the pcap in through a front-end engine configured by cfg
// and writes the frames the engine and the simulated back-ends sent to out
// as a pcap (nanosecond timestamps of engine time). Run buffers its writes
// to out and flushes them before returning.
func Run(cfg Config, in io.Reader, out io.Writer) (Summary, error) {
	cfg.setDefaults()
	pr, err := openCapture(in)
	if err != nil {
		return Summary{}, fmt.Errorf("replay: input: %w", err)
	}
	var src frameSource = pr
	if !cfg.VIP.IsValid() {
		if cfg.VIP, src, err = learnVIP(pr, cfg.Ports); err != nil {
			return Summary{}, fmt.Errorf("replay: input: %w", err)
		}
	}
	if err := cfg.validate(); err != nil {
		return Summary{}, err
	}
	fe, err := splice.NewFrontEnd(cfg.engineConfig())
	if err != nil {
		return Summary{}, fmt.Errorf("replay: %w", err)
	}
	bw := bufio.NewWriterSize(out, 256<<10)
	pw, err := link.NewPcapWriter(bw)
	if err != nil {
		return Summary{}, fmt.Errorf("replay: output: %w", err)
	}
	r := &replayer{
		cfg: cfg, fe: fe, pcap: pw, rw: newRewriter(),
		byIP:    make(map[wire.IP4]*simBackend),
		c2:      make(map[splice.FlowID]c2Ref),
		handoff: wire.IP4From(cfg.HandoffAddr),
		vip:     wire.IP4From(cfg.VIP),
		sum:     newSummary(),
	}
	r.sum.VIP = cfg.VIP.String()
	ctrl, err := controller.New(cfg.schedulerConfig(), &shimmedEngine{fe, r}, 0)
	if err != nil {
		return Summary{}, fmt.Errorf("replay: scheduler: %w", err)
	}
	r.ctrl = ctrl
	for k := 1; k <= cfg.Backends; k++ {
		b := newSimBackend(k, &r.cfg, &r.queue)
		r.backends = append(r.backends, b)
		r.byIP[b.ip] = b
	}
	err = r.loop(src)
	if err == nil {
		r.flushTimelines()
	}
	r.sum.finish(fe.Stats(), ctrl.Status(r.now))
	if err == nil && r.vipFrames == 0 {
		err = fmt.Errorf("replay: %w: of %d frames, none is IPv4 to the VIP %v", ErrNothingFed, r.sum.FramesIn, cfg.VIP)
	}
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("replay: output: %w", ferr)
	}
	if err == nil && r.tlErr != nil {
		err = fmt.Errorf("replay: timeline: %w", r.tlErr)
	}
	return r.sum, err
}

// loop is the discrete-event loop: at each step it runs the earliest of
// the next scheduled action, the engine's next deadline, the
// controller's next deadline and the next capture frame (ties in that
// order).
func (r *replayer) loop(pr frameSource) error {
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
		tAct, tDl, tCtl := r.queue.next(), r.fe.NextDeadline(), splice.Never
		if r.started && (!eof || r.ctrl.Flows() > 0) {
			// With no connection left, the controller only watches the
			// back-ends: that keeps nobody waiting after the capture.
			tCtl = r.ctrl.NextDeadline()
		}
		next := min(tIn, tAct, tDl, tCtl)
		if next == splice.Never || eof && end < next {
			break
		}
		if tDl == next || tCtl == next {
			if next == tickAt {
				if ticks++; ticks > maxTicksAtOneTime {
					return fmt.Errorf("replay: a deadline is stuck at %d ns", next)
				}
			} else {
				tickAt, ticks = next, 0
			}
		}
		switch {
		case tAct == next:
			r.advance(tAct)
			r.runAction(r.queue.pop())
		case tDl == next:
			r.advance(tDl)
			r.engine(func(out *splice.Output) { r.fe.Tick(r.now, out) })
		case tCtl == next:
			r.advance(tCtl)
			r.out.Reset()
			r.ctrl.Tick(r.now, &r.out)
			r.act()
		default:
			r.advance(inTime)
			r.start()
			r.input(inFrame)
			have = false
		}
	}
	return r.err
}

// start registers the simulated back-ends with the controller, at the
// time of the first capture frame.
func (r *replayer) start() {
	if r.started {
		return
	}
	r.started = true
	for _, b := range r.backends {
		r.control(&proto.Register{BackendID: uint32(b.k), IP: b.ip.Addr(), MAC: b.mac, ControlPort: shimPort,
			Capacity: uint16(r.cfg.Capacity), Incarnation: 1})
	}
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
		r.vipFrames++
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
	r.vipFrames++
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
	case actControl:
		r.control(a.msg)
	case actFeedback:
		r.feedback(a.flow)
	}
}

// fromBackend records a simulated back-end's frame and feeds it to the
// engine.
func (r *replayer) fromBackend(frame []byte) {
	r.sum.BackendFrames++
	r.record(frame)
	r.engine(func(out *splice.Output) { r.fe.Input(frame, r.now, out) })
}

// engine makes one call into the engine; the controller handles what it
// reported, as in the daemon, and the output goes where it is due.
func (r *replayer) engine(call func(out *splice.Output)) {
	r.out.Reset()
	call(&r.out.Engine)
	r.ctrl.HandleEvents(r.now, &r.out)
	r.act()
}

// control hands the controller a message of a simulated shim's, from
// that shim's control address (the controller checks it).
func (r *replayer) control(m proto.Message) {
	r.out.Reset()
	from := netip.AddrPortFrom(r.cfg.HandoffAddr, shimPort)
	if k := int(proto.BackendOf(m)); k >= 1 && k <= len(r.backends) {
		from = netip.AddrPortFrom(r.backends[k-1].ip.Addr(), shimPort)
	}
	r.ctrl.Control(from, m, r.now, &r.out)
	r.act()
}

// act routes an output: frames to the capture and the back-ends, events
// into the summary, control datagrams to the simulated shims.
func (r *replayer) act() {
	for _, f := range r.out.Engine.Frames {
		if f.Data != nil { // nil: taken back (splice.Output)
			r.emitted(f.Data)
		}
	}
	for i := range r.out.Engine.Events {
		switch ev := &r.out.Engine.Events[i]; ev.Kind {
		case splice.EvAnswered:
			r.sum.Answers[fmt.Sprint(ev.Status)]++
		case splice.EvClosed:
			r.sum.Closed[ev.Reason.String()]++
		}
	}
	for _, d := range r.out.Datagrams {
		r.datagram(d)
	}
	r.writeTimelines()
}

// datagram plays a shim receiving a control message: a Splice is
// confirmed after the control round trip, a probe answered.
func (r *replayer) datagram(d controller.Datagram) {
	b := r.byIP[wire.IP4From(d.To.Addr())]
	if b == nil {
		return
	}
	switch m := d.Msg.(type) {
	case *proto.Splice:
		flow := splice.FlowID(m.RequestID)
		r.c2[flow] = c2Ref{k: b.k, port: m.HandoffPort}
		r.queue.push(action{when: r.now.Add(r.cfg.ControlDelay), kind: actControl,
			msg: &proto.SpliceAck{RequestID: m.RequestID, BackendID: uint32(b.k), OK: true}})
	case *proto.Keepalive:
		if m.Seq == 0 { // a probe; our answers carry 1, so their echoes are not taken for probes
			r.queue.push(action{when: r.now.Add(r.cfg.ControlDelay), kind: actControl,
				msg: &proto.Keepalive{BackendID: uint32(b.k), Incarnation: 1, Seq: 1}})
		}
	}
}

// feedback is the shim's report that flow's oldest request was served:
// its response ended where the back-end's sequence space stands.
func (r *replayer) feedback(flow splice.FlowID) {
	ref, ok := r.c2[flow]
	if !ok {
		return
	}
	fb := &proto.Feedback{BackendID: uint32(ref.k), RequestID: uint64(flow), ServiceTime: r.cfg.ServiceDelay,
		FirstByte: r.cfg.ServiceDelay} // the simulated response leaves in one piece at the end of service
	if c := r.backends[ref.k-1].conns[ref.port]; c != nil {
		fb.ResponseEnd = uint32(c.isn + 1) // no response bytes: it ends where it starts
	}
	r.control(fb)
}

// shimmedEngine is the engine as the controller sees it in a replay:
// every request handed to a back-end (SpliceAcked, Admit) is reported
// served by its shim after the service delay and the trip back.
type shimmedEngine struct {
	*splice.FrontEnd
	r *replayer
}

func (e *shimmedEngine) SpliceAcked(id splice.FlowID, now splice.Time, out *splice.Output) error {
	err := e.FrontEnd.SpliceAcked(id, now, out)
	if err == nil {
		e.served(id, now)
	}
	return err
}

func (e *shimmedEngine) Admit(id splice.FlowID, now splice.Time, out *splice.Output) error {
	err := e.FrontEnd.Admit(id, now, out)
	if err == nil {
		e.served(id, now)
	}
	return err
}

func (e *shimmedEngine) served(id splice.FlowID, now splice.Time) {
	e.r.queue.push(action{when: now.Add(e.r.cfg.ServiceDelay + e.r.cfg.ControlDelay), kind: actFeedback, flow: id})
}

// shimPort is the simulated shims' control port.
const shimPort = 7401

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

// record writes a frame to the output capture stamped with engine time.
func (r *replayer) record(frame []byte) {
	if r.err != nil {
		return
	}
	if err := r.pcap.WriteFrame(time.Unix(0, int64(r.now)), frame); err != nil {
		r.err = fmt.Errorf("replay: output: %w", err)
	}
}
