package frontend

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// The SYN answer in the daemon (issue 7): a TC program on the link's
// ingress (splice/link/synanswer.go) answers clients' SYNs with the
// engine's SYN cookie in the kernel, so a new connection's SYN-ACK does
// not wait for a shard's loop to wake. The links then read IPv4 after tc
// ingress and never see the SYNs the program answered (synhide.go). Where
// they cannot (-timeline, a bridge's port), the engines read every SYN
// (AF_PACKET taps a frame before tc ingress), keep their timeline, and
// send nothing for the ones the program answered
// (splice.FrontEndConfig.LinkAnswersSYNs, the same rule as the program's).
//
// Order matters twice. The program is attached before the AF_PACKET
// sockets open, so that every SYN a socket reads, the program saw: an
// engine never takes for answered a SYN that came before the program.
// And the cookie's key follows the engines' epochs: the daemon switches
// the program to an epoch's key (written half an epoch before) as the
// engine clock enters it, and writes the next epoch's key into the other
// slot half way through, when no program can still be reading the slot
// it overwrites. Shard 0's loop does both, waking for them if nothing
// else wakes it.

// SYNAnswerUsage documents the -syn-answer flag.
const SYNAnswerUsage = "afpacket link: answer clients' SYNs with the SYN cookie in the kernel (a TC program on the link's ingress, through TCX on Linux 6.6+, else a clsact filter; needs CAP_BPF and CAP_NET_ADMIN, else a warning says why and the engine answers them): a wake-up of this process less before each new connection's first byte. SYNs it cannot answer byte for byte (Fast Open, unusual option layouts) the engine answers as before, and with -capture it answers all (the capture is to hold every SYN-ACK); /status: syn_answer"

// synAnswer is the program and the state of its keys.
type synAnswer struct {
	prog   *link.SYNAnswer
	secret [32]byte
	base   uint64      // CLOCK_MONOTONIC at the daemon's start, ns: engine time 0
	epoch  int64       // the epoch the program uses
	next   bool        // the next epoch's key is written
	due    splice.Time // when maintain must run next
	state  string      // for /status: how it is attached, or why not

	// errMu guards err, the last failure to update the maps: shard 0's
	// loop writes it, the admin handler reads it.
	errMu sync.Mutex
	err   error
}

// openSYNAnswer loads and attaches the program on cfg's link, with
// engine time 0 at the monotonic clock's base (ns), or returns nil and
// the reason it is off.
func openSYNAnswer(cfg *Config, secret [32]byte, base uint64) (*synAnswer, string, error) {
	if !cfg.SYNAnswer {
		return nil, "off", nil
	}
	if cfg.LinkType != "afpacket" {
		return nil, "off: a TAP link", nil
	}
	if cfg.Capture != "" {
		// The capture records what the engines read and write, with a
		// comment where they acted: a SYN-ACK sent by the kernel would
		// be missing from it.
		return nil, "off: -capture records the engine's SYN-ACKs", nil
	}
	ifi, err := net.InterfaceByName(cfg.Link)
	if err != nil {
		return nil, "", fmt.Errorf("frontend: link %s: %w", cfg.Link, err)
	}
	ecfg := engineConfig(cfg, 0, 1).WithDefaults()
	table, def := splice.CookieMSSTable()
	acfg := link.SYNAnswerConfig{
		Ifindex: ifi.Index, MAC: cfg.MAC, MSS: ecfg.MSS, WScale: uint8(ecfg.WScale),
		Window: uint16(min(ecfg.RecvBuffer, 65535)), MSSTable: table, DefaultMSS: def,
	}
	a := &synAnswer{secret: secret, base: base}
	if a.prog, err = link.NewSYNAnswer(acfg); err != nil {
		return nil, "off: " + err.Error(), err
	}
	// Keys before listeners: without a listener the program answers
	// nothing, so it never answers with no key.
	a.epoch = splice.CookieEpochOf(0)
	if err := a.writeKeys(0); err == nil {
		err = a.prog.SetListeners(as4s(cfg.VIPs), cfg.Ports, append(as4s(cfg.VIPs), cfg.Handoff.As4()))
	}
	if err == nil {
		err = a.prog.AttachIngress(ifi.Index)
	}
	if err != nil {
		a.prog.Close()
		return nil, "off: " + err.Error(), err
	}
	a.state = string(a.prog.Hook()) + ": ingress"
	return a, a.state, nil
}

// bpfErrArgs are the log arguments of a program the daemon could not
// load or attach: the error, and what to grant when it was refused.
func bpfErrArgs(err error) []any {
	args := []any{"err", err}
	if errors.Is(err, unix.EPERM) {
		args = append(args, "hint", "grant CAP_BPF (contrib/systemd/qsplice-frontend.service; README, \"Privileges\")")
	}
	return args
}

// monotonicNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns
// and of Go's time.Since.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // every Linux has it
	}
	return uint64(ts.Nano())
}

// writeKeys makes the program use the key of the epoch now is in, and
// has the next one written when now is past the epoch's middle; it sets
// when it must run again.
func (a *synAnswer) writeKeys(now splice.Time) error {
	ep := splice.CookieEpochOf(now)
	start := splice.Time(ep) * splice.CookieEpoch
	if ep != a.epoch || a.due == 0 {
		// Entering ep: its key went into its slot half an epoch ago (or
		// now, at the start); then the switch.
		k0, k1 := splice.CookieKeyOf(&a.secret, ep)
		if err := a.prog.SetKey(ep, k0, k1); err != nil {
			return err
		}
		if err := a.prog.SetCurrent(ep, a.base); err != nil {
			return err
		}
		a.epoch, a.next = ep, false
	}
	half := start + splice.CookieEpoch/2
	if !a.next && now >= half {
		k0, k1 := splice.CookieKeyOf(&a.secret, ep+1)
		if err := a.prog.SetKey(ep+1, k0, k1); err != nil {
			return err
		}
		a.next = true
	}
	a.due = half
	if a.next {
		a.due = start + splice.CookieEpoch
	}
	return nil
}

// maintain runs writeKeys when due (shard 0's pass); a failure is kept
// for /status and tried again at the next pass.
func (a *synAnswer) maintain(now splice.Time) {
	if now < a.due {
		return
	}
	err := a.writeKeys(now)
	if err != nil {
		a.due = now // again at the next pass
	}
	a.errMu.Lock()
	a.err = err
	a.errMu.Unlock()
}

func (a *synAnswer) close() error {
	if a == nil {
		return nil
	}
	return a.prog.Close()
}

// status is the program's part of /status.
func (a *synAnswer) status() (state string, answered uint64) {
	st, err := a.prog.Stats()
	state = a.state
	a.errMu.Lock()
	err = errors.Join(err, a.err)
	a.errMu.Unlock()
	if err != nil {
		state += " (" + err.Error() + ")"
	}
	return state, st.Answered
}

// as4s is addrs as the program's maps take them.
func as4s(addrs []netip.Addr) [][4]byte {
	out := make([][4]byte, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.As4())
	}
	return out
}
