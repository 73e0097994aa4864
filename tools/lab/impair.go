package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// Impairment on a host's path (`qsplice-lab impair HOST SPEC`, issue 11).
// tc netem does not work on these machines, so the lab puts the
// project's userspace impairment (link.Impair) in the path instead: in
// the switch namespace, the host's switch port leaves the bridge, a new
// veth pair HOSTi--HOSTo takes its place (HOSTo on the bridge), and a
// relay process (`qsplice-lab relay`) copies frames between the host's
// port and HOSTi, each direction through its own link.Impair. So the
// impairment applies both ways: delay=20ms adds 40 ms to the round trip,
// loss=1% loses about 1% of the frames each way. The relay reads and
// writes plain MTU-sized frames, so the host's link and the relay's
// devices run with offloads off while impaired; clear puts everything
// back as the lab had it. Down removes it all with the rest.

// impairPrefix names the relay process and the state file of a host's
// impairment.
const impairPrefix = "impair-"

// ParseImpair reads an impairment such as
// "delay=20ms,jitter=5ms,loss=1%,reorder=0.5%,rate=100mbit,seed=7".
func ParseImpair(spec string) (link.ImpairConfig, error) {
	var c link.ImpairConfig
	if strings.TrimSpace(spec) == "" {
		return c, errors.New("impair: empty; e.g. delay=20ms,jitter=5ms,loss=1%,reorder=0.5%,rate=100mbit")
	}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return c, fmt.Errorf("impair: %q is not key=value", kv)
		}
		var err error
		switch k {
		case "delay":
			c.Delay, err = time.ParseDuration(v)
		case "jitter":
			c.Jitter, err = time.ParseDuration(v)
		case "loss":
			c.Loss, err = parsePercent(v)
		case "reorder":
			c.Reorder, err = parsePercent(v)
		case "rate":
			c.RateBitsPerSec, err = parseRate(v)
		case "seed":
			c.Seed, err = strconv.ParseUint(v, 10, 64)
		case "limit":
			c.QueueLimit, err = strconv.Atoi(v)
		default:
			return c, fmt.Errorf("impair: unknown key %q (delay, jitter, loss, reorder, rate, seed, limit)", k)
		}
		if err != nil {
			return c, fmt.Errorf("impair: %s=%s: %v", k, v, err)
		}
	}
	switch {
	case c.Delay < 0 || c.Jitter < 0:
		return c, errors.New("impair: delay and jitter must not be negative")
	case c.Jitter > 0 && c.Delay == 0:
		return c, errors.New("impair: jitter needs a delay")
	case c.RateBitsPerSec < 0 || c.QueueLimit < 0:
		return c, errors.New("impair: rate and limit must not be negative")
	}
	return c, nil
}

// parsePercent reads "1%" (or a fraction, "0.01") as a probability.
func parsePercent(v string) (float64, error) {
	scale := 1.0
	if s, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = s, 0.01
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, err
	}
	if f *= scale; f < 0 || f > 1 {
		return 0, fmt.Errorf("%g is not a probability", f)
	}
	return f, nil
}

// parseRate reads a rate in bits per second: 100mbit, 1gbit, 500kbit,
// 64000 (bit/s).
func parseRate(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if s, ok := strings.CutSuffix(strings.ToLower(v), u.suffix); ok {
			v, mult = s, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q is not a rate (e.g. 100mbit)", v)
	}
	return int64(f * float64(mult)), nil
}

// relayDevs are the switch-side devices of host's impairment: the veth
// end the relay writes to, and its peer on the bridge.
func relayDevs(host string) (inner, outer string) { return host + "i", host + "o" }

// Impair puts the impairment spec (ParseImpair) on host's path, replacing
// any it had.
func (l *Lab) Impair(host, spec string) error {
	if !slices.Contains(l.Hosts(), host) {
		return fmt.Errorf("lab: impair: no host %q (hosts: %s)", host, strings.Join(l.Hosts(), " "))
	}
	if _, err := ParseImpair(spec); err != nil {
		return err
	}
	if err := l.ClearImpair(host); err != nil {
		return err
	}
	sw := l.NS("sw")
	inner, outer := relayDevs(host)
	if err := ipBatch(sw, []string{
		"link set " + host + " nomaster",
		fmt.Sprintf("link add name %s type veth peer name %s", inner, outer),
		fmt.Sprintf("link set %s master %s up", outer, bridgeDev),
		"link set " + inner + " up",
	}); err != nil {
		return err
	}
	for _, d := range []struct{ ns, dev string }{{sw, host}, {sw, inner}, {sw, outer}, {l.NS(host), hostDev}} {
		if err := offloadsOff(d.ns, d.dev); err != nil {
			return err
		}
	}
	p := l.relaySpec(host, spec)
	if _, err := os.Stat(p.argv[0]); err != nil {
		return fmt.Errorf("lab: impair: the relay runs %s: %w", p.argv[0], err)
	}
	if err := l.start(p); err != nil {
		return err
	}
	if err := l.waitRelay(p, host); err != nil {
		return err
	}
	if err := os.WriteFile(l.statePath(impairPrefix+host), []byte(spec+"\n"), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// waitRelay waits until the relay has opened its sockets (its first log
// line), so that what follows Impair already crosses it.
func (l *Lab) waitRelay(p procSpec, host string) error {
	want := "relay " + host + " <-> "
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if b, err := os.ReadFile(l.LogPath(p.name)); err == nil && strings.Contains(string(b), want) {
			return nil
		}
		if st := l.status(p); !st.alive {
			return fmt.Errorf("lab: impair: the relay stopped (%s); see %s", st.detail, l.LogPath(p.name))
		}
		time.Sleep(20 * time.Millisecond) // watching the log, the one sign the relay gives
	}
	return fmt.Errorf("lab: impair: the relay did not start in 5 s; see %s", l.LogPath(p.name))
}

func (l *Lab) relaySpec(host, spec string) procSpec {
	inner, _ := relayDevs(host)
	return procSpec{name: impairPrefix + host, host: "sw",
		argv: []string{filepath.Join(l.cfg.BinDir, "qsplice-lab"), "relay", "-a", host, "-b", inner, "-spec", spec}}
}

// ClearImpair takes host's impairment away, if it has one: the relay
// stops, the host's switch port goes back on the bridge, and the links'
// offloads are what the lab set.
func (l *Lab) ClearImpair(host string) error {
	state := l.statePath(impairPrefix + host)
	inner, _ := relayDevs(host)
	sw := l.NS("sw")
	if _, err := os.Stat(state); errors.Is(err, os.ErrNotExist) && !linkExists(sw, inner) {
		return nil
	}
	if err := l.stop(l.relaySpec(host, "")); err != nil {
		return err
	}
	var cmds []string
	if linkExists(sw, inner) {
		cmds = append(cmds, "link del "+inner) // and its peer
	}
	cmds = append(cmds, fmt.Sprintf("link set %s master %s up", host, bridgeDev))
	if err := ipBatch(sw, cmds); err != nil {
		return err
	}
	if err := l.linkOffloads(sw, host); err != nil {
		return err
	}
	if err := l.linkOffloads(l.NS(host), hostDev); err != nil {
		return err
	}
	if err := os.Remove(state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// Impairments returns each impaired host's spec.
func (l *Lab) Impairments() map[string]string {
	m := map[string]string{}
	for _, h := range l.Hosts() {
		if b, err := os.ReadFile(l.statePath(impairPrefix + h)); err == nil {
			m[h] = strings.TrimSpace(string(b))
		}
	}
	return m
}

// RunRelay is the relay process (`qsplice-lab relay`, in the switch
// namespace): it copies frames between devices a and b, each direction
// through its own link.Impair with cfg (the b-to-a direction's draws
// seeded apart), until SIGTERM or SIGINT, and reports what it did. Other
// hosts' links keep their offloads, so frames arrive as TCP super-frames
// and with partial checksums: they are cut into segments and completed
// (wire.SegmentTCP4) before the impairment sees them, as a NIC would put
// them on the wire.
func RunRelay(a, b string, cfg link.ImpairConfig) error {
	open := func(dev string) (*link.AFPacket, error) {
		return link.OpenAFPacket(dev, link.AFPacketConfig{Promiscuous: true, VNetHdr: true})
	}
	la, err := open(a)
	if err != nil {
		return err
	}
	lb, err := open(b)
	if err != nil {
		la.Close()
		return err
	}
	back := cfg
	back.Seed = cfg.Seed + 0x9e3779b97f4a7c15
	toB, toA := link.NewImpair(lb, cfg), link.NewImpair(la, back)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 2)
	var refused [2]atomic.Uint64
	pump := func(dir int, from *link.AFPacket, to *link.Impair) {
		batch := link.NewBatch(64, link.MaxFrame)
		out := make([]byte, 2*link.MaxFrame)
		segs := make([][]byte, 0, 64)
		for {
			n, err := from.ReadBatch(batch)
			if err != nil {
				errs <- err
				return
			}
			for i := range n {
				segs, err = wire.SegmentTCP4(batch.Frame(i), batch.VNet[i], out, segs[:0])
				if err != nil {
					refused[dir].Add(1) // not TCP/IPv4 with a header the kernel should not have made
					continue
				}
				for _, s := range segs {
					if err := to.WriteFrame(s); err != nil {
						errs <- err
						return
					}
				}
			}
		}
	}
	go pump(0, la, toB)
	go pump(1, lb, toA)
	fmt.Printf("relay %s <-> %s: %v\n", a, b, cfg)
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errs:
	}
	sa, sb := toB.ImpairStats(), toA.ImpairStats()
	fmt.Printf("relay %s -> %s: %+v, refused %d; %s -> %s: %+v, refused %d\n",
		a, b, sa, refused[0].Load(), b, a, sb, refused[1].Load())
	toB.Close()
	toA.Close()
	return err
}
