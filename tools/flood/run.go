package flood

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// Mode is what the generator sends.
type Mode string

const (
	ModeSYN   Mode = "syn"   // spoofed SYNs from SpoofPrefix
	ModeHeads Mode = "heads" // handshakes and partial heads from one source
)

// Config is one run.
type Config struct {
	Mode           Mode
	SrcMAC, DstMAC wire.MAC // this host's MAC; the target's (or its gateway's)
	Target         netip.Addr
	Ports          []uint16
	// Rate is SYNs per second: in syn mode every frame, in heads mode
	// every new flow (its final ACK follows when the SYN-ACK comes back).
	Rate     float64
	Duration time.Duration // how long to send; 0: until Flows are opened (heads) or ctx ends
	// Flows stops heads mode after this many flows (0: as many as the
	// ports allow, Heads.Capacity).
	Flows int
	// Spoof is the syn mode's source range, inside SpoofPrefix; zero:
	// SpoofPrefix.
	Spoof netip.Prefix
	// Source is heads mode's one source address.
	Source netip.Addr
	Head   []byte // heads mode's partial head; nil: DefaultHead
	// Linger keeps reading answers after the last SYN (default 1 s).
	Linger time.Duration
	Seed   uint64
}

// Summary is what a run sent and got back.
type Summary struct {
	Mode      Mode    `json:"mode"`
	Seconds   float64 `json:"seconds"`    // sending time
	Sent      uint64  `json:"sent"`       // SYNs
	Answered  uint64  `json:"answered"`   // SYN-ACKs (heads: first per flow)
	Reset     uint64  `json:"reset"`      // RSTs (heads: flows refused or reset)
	HeadsSent uint64  `json:"heads_sent"` // heads: final ACKs with the head (retransmissions included)
	// HeadsAcked counts flows whose head the target acknowledged: flows
	// it holds state for.
	HeadsAcked uint64 `json:"heads_acked"`
	// ServerData counts flows on which the target sent data or FIN (a
	// 408 after its head deadline, a 503...).
	ServerData uint64 `json:"server_data"`
	SendErrors uint64 `json:"send_errors"`
}

// String is the one-line form the command prints.
func (s Summary) String() string {
	rate := 0.0
	if s.Seconds > 0 {
		rate = float64(s.Sent) / s.Seconds
	}
	line := fmt.Sprintf("%s: %.1f s, sent %d SYNs (%.0f/s), answered %d, refused/reset %d",
		s.Mode, s.Seconds, s.Sent, rate, s.Answered, s.Reset)
	if s.Mode == ModeHeads {
		line += fmt.Sprintf(", heads sent %d, heads acknowledged %d, server data/FIN %d", s.HeadsSent, s.HeadsAcked, s.ServerData)
	}
	if s.SendErrors > 0 {
		line += fmt.Sprintf(", send errors %d", s.SendErrors)
	}
	return line
}

// counters are the live form of Summary.
type counters struct {
	sent, answered, reset, headsSent, headsAcked, serverData, sendErrors atomic.Uint64
}

func (c *counters) summary(mode Mode, secs float64) Summary {
	return Summary{Mode: mode, Seconds: secs, Sent: c.sent.Load(), Answered: c.answered.Load(),
		Reset: c.reset.Load(), HeadsSent: c.headsSent.Load(), HeadsAcked: c.headsAcked.Load(),
		ServerData: c.serverData.Load(), SendErrors: c.sendErrors.Load()}
}

func (c *counters) count(ev Event) {
	switch ev {
	case EvSynAck:
		c.answered.Add(1)
	case EvReset:
		c.reset.Add(1)
	case EvHeadAcked:
		c.headsAcked.Add(1)
	case EvServerData:
		c.serverData.Add(1)
	}
}

// batchLen is how many frames one sendmmsg/recvmmsg moves.
const batchLen = 64

// Run sends what cfg says on lk, reads the answers, and returns the
// summary. With progress non-nil it prints a line once a second. It
// stops at the end of cfg.Duration, when heads mode has opened its flows,
// or when ctx ends, then reads answers for cfg.Linger. lk must not carry
// virtio-net headers (frames are complete) and is left open.
func Run(ctx context.Context, cfg Config, lk link.BatchLink, progress io.Writer) (Summary, error) {
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		return Summary{}, fmt.Errorf("flood: rate %v, want a positive number of SYNs per second", cfg.Rate)
	}
	if cfg.Linger == 0 {
		cfg.Linger = time.Second
	}
	var (
		next  func(b []byte) int                     // the next SYN, 0: done
		input func(frame, reply []byte) (int, Event) // an answer
		mu    sync.Mutex                             // heads mode: Heads is shared by sender and receiver
	)
	switch cfg.Mode {
	case ModeSYN:
		m, err := NewSynMaker(cfg.SrcMAC, cfg.DstMAC, cfg.Target, cfg.Ports, cfg.Spoof, cfg.Seed)
		if err != nil {
			return Summary{}, err
		}
		next = func(b []byte) int { n, _ := m.Next(b); return n }
		target := wire.IP4From(cfg.Target)
		var p wire.Packet
		input = func(frame, _ []byte) (int, Event) { return 0, ClassifySynReply(frame, target, &p) }
	case ModeHeads:
		h, err := NewHeads(HeadsConfig{SrcMAC: cfg.SrcMAC, DstMAC: cfg.DstMAC, Source: cfg.Source,
			Target: cfg.Target, Ports: cfg.Ports, Head: cfg.Head, Seed: cfg.Seed})
		if err != nil {
			return Summary{}, err
		}
		limit := h.Capacity()
		if cfg.Flows > limit {
			return Summary{}, fmt.Errorf("flood: %d flows from one source to %d port(s): at most %d", cfg.Flows, len(cfg.Ports), limit)
		}
		if cfg.Flows > 0 {
			limit = cfg.Flows
		}
		next = func(b []byte) int {
			mu.Lock()
			defer mu.Unlock()
			if h.Started() >= limit {
				return 0
			}
			return h.NextSYN(b)
		}
		input = func(frame, reply []byte) (int, Event) {
			mu.Lock()
			defer mu.Unlock()
			return h.Input(frame, reply)
		}
	default:
		return Summary{}, fmt.Errorf("flood: mode %q, want %q or %q", cfg.Mode, ModeSYN, ModeHeads)
	}

	// Checked after the configuration, so a bad spoof range is refused
	// before anything touches a link.
	if lk == nil || lk.VNetHdr() {
		return Summary{}, errors.New("flood: need a link without virtio-net headers")
	}
	var c counters
	start := time.Now()
	stopRx := make(chan struct{})
	rxDone := make(chan error, 1)
	go func() { rxDone <- receive(lk, input, &c, stopRx) }()
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if progress != nil {
		progressDone.Add(1)
		go func() {
			defer progressDone.Done()
			printProgress(progress, cfg.Mode, &c, start, stopProgress)
		}()
	}

	sendErr := send(ctx, cfg, lk, next, &c, start)
	secs := time.Since(start).Seconds()
	select {
	case <-time.After(cfg.Linger):
	case <-ctx.Done():
	}
	close(stopRx)
	rxErr := <-rxDone
	close(stopProgress)
	progressDone.Wait()
	return c.summary(cfg.Mode, secs), errors.Join(sendErr, rxErr)
}

// send paces SYNs at cfg.Rate in batches until the duration is over, next
// says there are no more, or ctx ends.
func send(ctx context.Context, cfg Config, lk link.BatchLink, next func([]byte) int, c *counters, start time.Time) error {
	bufs := make([][]byte, batchLen)
	for i := range bufs {
		bufs[i] = make([]byte, MaxFrameLen)
	}
	frames := make([][]byte, 0, batchLen)
	var sent int64
	for ctx.Err() == nil {
		elapsed := time.Since(start)
		if cfg.Duration > 0 && elapsed >= cfg.Duration {
			return nil
		}
		due := int64(cfg.Rate*elapsed.Seconds()) + 1 - sent
		if due <= 0 {
			wait := time.Duration(float64(sent)/cfg.Rate*float64(time.Second)) - elapsed
			time.Sleep(max(wait, 50*time.Microsecond))
			continue
		}
		frames = frames[:0]
		for i := 0; i < batchLen && int64(i) < due; i++ {
			n := next(bufs[i])
			if n == 0 {
				break
			}
			frames = append(frames, bufs[i][:n])
		}
		if len(frames) == 0 {
			return nil // heads mode opened every flow
		}
		if err := writeAll(lk, frames, c); err != nil {
			return err
		}
		c.sent.Add(uint64(len(frames)))
		sent += int64(len(frames))
	}
	return nil
}

// writeAll sends frames, skipping (and counting) any the kernel refuses;
// it fails only when the link is closed.
func writeAll(lk link.BatchLink, frames [][]byte, c *counters) error {
	for len(frames) > 0 {
		n, err := lk.WriteBatch(frames, nil)
		if err == nil {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		c.sendErrors.Add(1)
		frames = frames[n+1:]
	}
	return nil
}

// receive reads answers until stop is closed, sending heads mode's final
// ACKs back in batches.
func receive(lk link.BatchLink, input func(frame, reply []byte) (int, Event), c *counters, stop <-chan struct{}) error {
	poller, err := link.NewPoller()
	if err != nil {
		return err
	}
	defer poller.Close()
	if err := poller.Add(lk.FD(), 0); err != nil {
		return err
	}
	b := link.NewBatch(batchLen, 2048)
	replies := make([][]byte, batchLen)
	for i := range replies {
		replies[i] = make([]byte, MaxFrameLen)
	}
	out := make([][]byte, 0, batchLen)
	ready := make([]uint32, 1)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if _, err := poller.Wait(100*time.Millisecond, ready); err != nil {
			return err
		}
		for {
			n, err := lk.ReadBatch(b)
			if err != nil {
				return err
			}
			out = out[:0]
			for i := range n {
				rn, ev := input(b.Frame(i), replies[len(out)])
				c.count(ev)
				if rn > 0 {
					if ev == EvSynAck || ev == EvSynAckAgain {
						c.headsSent.Add(1)
					}
					out = append(out, replies[len(out)][:rn])
				}
			}
			if len(out) > 0 {
				if err := writeAll(lk, out, c); err != nil {
					return err
				}
			}
			if n < len(b.Bufs) {
				break
			}
		}
	}
}

// printProgress writes one line a second until stop is closed.
func printProgress(w io.Writer, mode Mode, c *counters, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			s := c.summary(mode, time.Since(start).Seconds())
			fmt.Fprintf(w, "%5.0fs  sent %d (+%d/s)  answered %d  refused/reset %d", s.Seconds, s.Sent, s.Sent-last, s.Answered, s.Reset)
			if mode == ModeHeads {
				fmt.Fprintf(w, "  heads acked %d  server data %d", s.HeadsAcked, s.ServerData)
			}
			fmt.Fprintln(w)
			last = s.Sent
		}
	}
}
