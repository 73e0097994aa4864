package flood

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// Root-only: the generator on a real AF_PACKET socket, in a namespace
// of its own joined by a veth to a second one where the test listens.

type wirePair struct {
	attacker, victim       *link.AFPacket
	attackerMAC, victimMAC wire.MAC
	nsA, nsB               string // the attacker's and the victim's namespaces
}

// devStats is the part of `ip -s -j link show` the tests read.
type devStats struct {
	RX struct{ Packets, Dropped uint64 }
	TX struct{ Packets, Dropped uint64 }
}

// stats reads a device's counters.
func (w *wirePair) stats(t *testing.T, ns, dev string) devStats {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip -n %s -s link show dev %s: %v", ns, dev, err)
	}
	var links []struct {
		Stats devStats `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s -j link show dev %s: %v: %s", dev, err, out)
	}
	return links[0].Stats
}

// newWirePair builds two namespaces joined by qsf0 <-> qsf1, with IPv6
// off, and opens an AF_PACKET link on each end. Everything is removed
// when the test ends, also on failure.
func newWirePair(t *testing.T) wirePair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and AF_PACKET")
	}
	var suffix [3]byte
	rand.Read(suffix[:])
	nsA, nsB := "qs-flood-a"+hex.EncodeToString(suffix[:]), "qs-flood-b"+hex.EncodeToString(suffix[:])
	for _, ns := range []string{nsA, nsB} {
		if err := netns.Add(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		})
		if err := netns.Run(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("ip", "link", "add", "qsf0", "netns", nsA, "type", "veth", "peer", "name", "qsf1", "netns", nsB).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v: %s", err, out)
	}
	w := wirePair{nsA: nsA, nsB: nsB}
	for _, end := range []struct {
		ns, dev string
		lk      **link.AFPacket
		mac     *wire.MAC
	}{{nsA, "qsf0", &w.attacker, &w.attackerMAC}, {nsB, "qsf1", &w.victim, &w.victimMAC}} {
		if err := netns.Run(end.ns, "ip", "link", "set", end.dev, "up"); err != nil {
			t.Fatal(err)
		}
		err := netns.Do(end.ns, func() error {
			ifi, err := net.InterfaceByName(end.dev)
			if err != nil {
				return err
			}
			copy(end.mac[:], ifi.HardwareAddr)
			*end.lk, err = link.OpenAFPacket(end.dev, link.AFPacketConfig{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		lk := *end.lk
		t.Cleanup(func() { lk.Close() })
	}
	// qsf0 came up first: frames sent on it before it runs are dropped
	// without an error (see netns.WaitRunning), and the tests count every
	// frame.
	if err := netns.WaitRunning(nsA, 5*time.Second, "qsf0"); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSynFloodOnTheWire: what the generator emits on a real link parses
// as SYNs, exact checksums, from 198.18.128.0/17 only, to the target's
// MAC, address and ports; and the victim's SYN-ACKs and RSTs back to the
// spoofed addresses are counted.
func TestSynFloodOnTheWire(t *testing.T) {
	w := newWirePair(t)
	vip := netip.MustParseAddr("198.18.0.100")
	target := wire.IP4From(vip)

	// The victim answers every other SYN with a SYN-ACK and the rest with
	// a RST, until the test stops it.
	var (
		mu                 sync.Mutex
		syns, synAcks, rst int
		srcs               = map[netip.Addr]bool{}
	)
	stopVictim := runVictim(t, &w, func(frame []byte, p *wire.Packet) (wire.TCPFrame, bool, error) {
		if err := synError(frame, w.attackerMAC, w.victimMAC, target); err != nil {
			return wire.TCPFrame{}, false, err
		}
		mu.Lock()
		defer mu.Unlock()
		src := p.IP.Src()
		srcs[src.Addr()] = true
		syns++
		flags := uint8(wire.TCPFlagSYN | wire.TCPFlagACK)
		if syns%2 == 0 {
			flags = wire.TCPFlagRST | wire.TCPFlagACK
			rst++
		} else {
			synAcks++
		}
		return wire.TCPFrame{SrcMAC: w.victimMAC, DstMAC: w.attackerMAC, Src: target, Dst: src,
			SrcPort: p.TCP.DstPort(), DstPort: p.TCP.SrcPort(), Seq: 77, Ack: p.TCP.Seq() + 1, Flags: flags, Window: 1000}, true, nil
	})

	cfg := Config{Mode: ModeSYN, SrcMAC: w.attackerMAC, DstMAC: w.victimMAC, Target: vip, Ports: []uint16{80, 8080},
		Rate: 5000, Duration: 400 * time.Millisecond, Linger: 300 * time.Millisecond, Seed: 11}
	sum, err := Run(t.Context(), cfg, w.attacker, nil)
	stopVictim()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary: %v; the victim saw %d SYNs from %d addresses", sum, syns, len(srcs))
	if sum.Sent < 1000 || sum.Sent > 2500 {
		t.Errorf("sent %d SYNs in 0.4 s at 5000/s", sum.Sent)
	}
	// Every SYN reached the victim's socket: those it did not read, the
	// kernel dropped because the socket's buffer was full (a loaded
	// machine leaves the victim's goroutine unscheduled for tens of
	// milliseconds at 5000 frames/s); a few percent at most.
	// The veth itself drops a frame only when the receiving CPU's backlog
	// is full (its ksoftirqd starved by other load); it counts those as
	// the sending end's tx drops.
	drops, err := w.victim.KernelDrops()
	if err != nil {
		t.Fatal(err)
	}
	attackerEnd, victimEnd := w.stats(t, w.nsA, "qsf0"), w.stats(t, w.nsB, "qsf1")
	t.Logf("the veth delivered %d and dropped %d; the victim's socket dropped %d", victimEnd.RX.Packets, attackerEnd.TX.Dropped, drops)
	if uint64(syns)+drops+attackerEnd.TX.Dropped != sum.Sent || drops+attackerEnd.TX.Dropped > sum.Sent/10 {
		t.Errorf("the generator sent %d SYNs; the veth dropped %d and delivered %d; the victim's socket dropped %d and it read %d",
			sum.Sent, attackerEnd.TX.Dropped, victimEnd.RX.Packets, drops, syns)
	}
	for a := range srcs {
		if !SpoofPrefix.Contains(a) {
			t.Fatalf("a SYN came from %v, outside %v", a, SpoofPrefix)
		}
	}
	if len(srcs) < syns*9/10 {
		t.Errorf("%d SYNs from only %d addresses", syns, len(srcs))
	}
	if sum.Answered != uint64(synAcks) || sum.Reset != uint64(rst) {
		t.Errorf("counted %d SYN-ACKs and %d RSTs, the victim sent %d and %d", sum.Answered, sum.Reset, synAcks, rst)
	}
}

// TestHeadsOnTheWire: heads mode against a victim that answers every SYN
// with a SYN-ACK and acknowledges the head: every flow completes its
// handshake with the head, exactly once, and stays silent after.
func TestHeadsOnTheWire(t *testing.T) {
	w := newWirePair(t)
	vip := netip.MustParseAddr("198.18.0.100")
	src := netip.MustParseAddr("198.18.0.200")
	const flows = 3000
	var (
		mu                  sync.Mutex
		syns, heads, others int
	)
	stopVictim := runVictim(t, &w, func(_ []byte, p *wire.Packet) (wire.TCPFrame, bool, error) {
		if p.IP.Src() != wire.IP4From(src) {
			return wire.TCPFrame{}, false, nil
		}
		f := wire.TCPFrame{SrcMAC: w.victimMAC, DstMAC: w.attackerMAC, Src: wire.IP4From(vip), Dst: p.IP.Src(),
			SrcPort: p.TCP.DstPort(), DstPort: p.TCP.SrcPort(), Window: 1000}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.TCP.Flags() == wire.TCPFlagSYN:
			syns++
			f.Seq, f.Ack, f.Flags = 1000, p.TCP.Seq()+1, wire.TCPFlagSYN|wire.TCPFlagACK
		case string(p.TCP.Payload()) == DefaultHead && p.TCP.Ack() == 1001:
			heads++
			f.Seq, f.Ack, f.Flags = 1001, p.TCP.Seq()+wire.Seq(len(DefaultHead)), wire.TCPFlagACK
		default:
			others++
			return f, false, nil
		}
		return f, true, nil
	})
	cfg := Config{Mode: ModeHeads, SrcMAC: w.attackerMAC, DstMAC: w.victimMAC, Target: vip, Ports: []uint16{80, 8080},
		Source: src, Rate: 20000, Flows: flows, Linger: 500 * time.Millisecond, Seed: 5}
	sum, err := Run(t.Context(), cfg, w.attacker, nil)
	stopVictim()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary: %v", sum)
	if sum.Sent != flows || syns != flows {
		t.Errorf("sent %d SYNs, the victim saw %d, want %d", sum.Sent, syns, flows)
	}
	if sum.Answered != flows || sum.HeadsSent != flows || heads != flows || sum.HeadsAcked != flows {
		t.Errorf("answered %d, heads sent %d (victim saw %d), acknowledged %d; want %d each", sum.Answered, sum.HeadsSent, heads, sum.HeadsAcked, flows)
	}
	if others != 0 || sum.Reset != 0 {
		t.Errorf("the attacker sent %d other segments after its heads, saw %d resets", others, sum.Reset)
	}
}

// runVictim plays the victim on w until the returned stop is called: it
// reads what reaches the victim in batches and, for each TCP frame,
// sends the reply answer returns (when it says to); an error from answer
// fails the test and ends the victim.
func runVictim(t *testing.T, w *wirePair, answer func(frame []byte, p *wire.Packet) (reply wire.TCPFrame, send bool, err error)) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := link.NewBatch(64, 2048)
		out := make([]byte, MaxFrameLen)
		var p wire.Packet
		for {
			select {
			case <-quit:
				return
			default:
			}
			n, err := w.victim.ReadBatch(b)
			if err != nil {
				t.Error(err)
				return
			}
			if n == 0 {
				time.Sleep(time.Millisecond) // nothing waiting: the link does not block
				continue
			}
			for i := range n {
				frame := b.Frame(i)
				if wire.Parse(frame, &p) != nil || p.Kind != wire.KindTCP {
					continue // the kernel's own frames, if any
				}
				f, send, err := answer(frame, &p)
				if err != nil {
					t.Error(err)
					return
				}
				if !send {
					continue
				}
				if err := w.victim.WriteFrame(out[:f.Encode(out)]); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
