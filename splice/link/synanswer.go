package link

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// The front-end's SYN answer (issue 7).
//
// A new connection's first step through the VIP is the front-end's
// SYN-ACK, and it cost a wake-up of the front-end's thread: 40-60 us on
// the lab host, where the kernel of a direct connection answers inline.
// The answer needs no state, only the SYN cookie (splice/cookie.go), and
// the cookie is a SipHash-2-4 of the SYN's addresses, ports, sequence
// number and options under the epoch's key: something a TC program can
// compute. SYNAnswer is that program, on the front-end link's ingress: it
// rewrites a client's SYN in place into the SYN-ACK the engine would send
// (byte for byte but the timestamp's clock, read in the kernel rather than
// at the engine's pass) and sends it back out of the same device
// (bpf_redirect to the egress), in the softirq that received the SYN.
//
// A socket bound to IPv4 alone (AFPacketConfig.Protocol) reads frames
// after tc ingress and never sees the SYNs the program answered: the
// front-end's links do that (frontend/synhide.go). A socket of every
// protocol still sees the SYN: AF_PACKET hands a frame to those sockets
// before tc ingress runs. An engine behind one does everything but send
// the SYN-ACK for the SYNs the program answers
// (splice.FrontEndConfig.LinkAnswersSYNs), which it knows by the same
// rule (splice/fe_linksyn.go, linkAnswersSYN); a test runs both on the
// same frames (splice/fe_linksyn_link_test.go). The rule:
//
//   - the checks every engine makes at ingress (ingress.go): IPv4 without
//     options, not a fragment, a valid IP checksum, TTL above 0, a unicast
//     source MAC, a source neither martian nor one of the front-end's own
//     addresses; then a destination address and port that listen;
//   - SYN without ACK, RST or FIN, options that parse as the engine parses
//     them (wire.ParseOptions) and are only MSS, window scale,
//     SACK-permitted, timestamps, NOP and EOL;
//   - no payload, and options exactly as long as the SYN-ACK's will be,
//     and a frame that ends where IPv4 says: the answer is written over
//     the SYN without moving a byte. What Linux, and so curl, wrk and the
//     benchmark's clients send meets this with or without timestamps,
//     SACK and window scaling.
//
// Everything else (Fast Open SYNs, odd layouts) goes on to the engine's
// socket as before and the engine answers it.
//
// Checksums. The IP header's is computed whole. The TCP checksum is
// updated by the difference between the old and the new header
// (bpf_l4_csum_replace): on a frame a local sender left to be summed
// (CHECKSUM_PARTIAL, what a veth carries) the field is left alone, since
// the device or the receiving kernel sums it; on a frame whose sum is
// complete, the new sum is right if the old one was, and wrong if it was
// wrong, so a corrupted SYN gets an answer the client drops. Addresses and
// ports only swap, and the length does not change, so the pseudo-header's
// sum stays. The skb's own sum of a CHECKSUM_COMPLETE frame stays right
// for the same reason: the IP header and the TCP segment sum to what they
// summed to before.
//
// Keys. The cookie's key changes every epoch (64 s); the program reads
// the epoch and key from a map the daemon keeps (SetKey, SetCurrent): two
// slots, by the epoch's parity, and the current epoch with the clock's
// base. The daemon switches the current epoch as the engine enters it and
// writes the next epoch's key into the other slot only in the middle of
// the epoch, so no program reads a slot while it is written. The
// timestamp's clock is the engine's: monotonic milliseconds since the
// daemon started, bpf_ktime_get_ns minus the base.

// SYNAnswerConfig is what the SYN-ACK says that does not depend on the SYN.
type SYNAnswerConfig struct {
	Ifindex int     // the link's device: the program sends the SYN-ACK out of it
	MAC     [6]byte // the front-end's source MAC
	MSS     uint16  // the MSS option the front-end announces
	WScale  uint8   // its window scale, when the client offered one
	Window  uint16  // the SYN-ACK's window
	// MSSTable and DefaultMSS are the cookie's MSS encoding
	// (splice.CookieMSS): the index of the largest entry not above the
	// client's MSS (DefaultMSS without an MSS option), or 0.
	MSSTable   [8]uint16
	DefaultMSS uint16
}

// SYNAnswerStats are the program's counters, summed over CPUs.
type SYNAnswerStats struct {
	Answered uint64 // SYNs answered with a SYN-ACK by the program
}

// SYNAnswer is the program, its maps and its attachment.
type SYNAnswer struct {
	listen *ebpf.Map // (address, port) that listen; (address, 0): our own addresses
	keys   *ebpf.Map // cookie keys by epoch parity, and the current epoch
	stats  *ebpf.Map
	prog   *ebpf.Program
	attach tcAttachment
	hook   Hook
}

// Map layouts.
const (
	answerKeySize   = 24 // slots 0, 1: epoch, k0, k1; slot 2: current epoch, clock base (ns)
	answerSlotCur   = 2
	answerStatsSize = 8
	listenKeySize   = 8 // IPv4 address, port (both network order), 0, 0
)

// NewSYNAnswer loads the program. It needs CAP_BPF and CAP_NET_ADMIN.
// Until SetListeners, SetKey and SetCurrent have run it answers nothing.
func NewSYNAnswer(cfg SYNAnswerConfig) (*SYNAnswer, error) {
	if cfg.Ifindex <= 0 {
		return nil, errors.New("SYN answer: no device index")
	}
	a := &SYNAnswer{}
	var err error
	if a.listen, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_listen", Type: ebpf.Hash, KeySize: listenKeySize, ValueSize: 4, MaxEntries: 4096,
	}); err != nil {
		return nil, fmt.Errorf("SYN answer: listener map: %w", err)
	}
	if a.keys, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_ckeys", Type: ebpf.Array, KeySize: 4, ValueSize: answerKeySize, MaxEntries: 3,
	}); err != nil {
		a.Close()
		return nil, fmt.Errorf("SYN answer: key map: %w", err)
	}
	if a.stats, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_ansstat", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: answerStatsSize, MaxEntries: 1,
	}); err != nil {
		a.Close()
		return nil, fmt.Errorf("SYN answer: stats map: %w", err)
	}
	if a.prog, err = loadTC("SYN answer", "qsplice_synans", synAnswerProgram(cfg, a.listen.FD(), a.keys.FD(), a.stats.FD())); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func listenKey(addr [4]byte, port uint16) [listenKeySize]byte {
	var k [listenKeySize]byte
	copy(k[:4], addr[:])
	binary.BigEndian.PutUint16(k[4:], port)
	return k
}

// SetListeners makes the program answer SYNs to every address of vips on
// every port of ports, and refuse those from own (the VIPs and the
// handoff address: a spoofed SYN from ourselves). New entries go in
// before stale ones leave, so a reload that keeps a listener never has a
// moment without it.
func (a *SYNAnswer) SetListeners(vips [][4]byte, ports []uint16, own [][4]byte) error {
	want := map[[listenKeySize]byte]bool{}
	for _, v := range vips {
		for _, p := range ports {
			if p != 0 {
				want[listenKey(v, p)] = true
			}
		}
	}
	for _, o := range own {
		want[listenKey(o, 0)] = true
	}
	one := uint32(1)
	for k := range want {
		if err := a.listen.Put(k, one); err != nil {
			return fmt.Errorf("SYN answer: add a listener: %w", err)
		}
	}
	var stale [][listenKeySize]byte
	var k [listenKeySize]byte
	it := a.listen.Iterate()
	var v uint32
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("SYN answer: list the listeners: %w", err)
	}
	for _, k := range stale {
		if err := a.listen.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("SYN answer: remove a listener: %w", err)
		}
	}
	return nil
}

// SetKey writes the cookie key (SipHash's k0, k1) of epoch into the slot
// of its parity.
func (a *SYNAnswer) SetKey(epoch int64, k0, k1 uint64) error {
	var v [answerKeySize]byte
	binary.NativeEndian.PutUint64(v[0:], uint64(epoch))
	binary.NativeEndian.PutUint64(v[8:], k0)
	binary.NativeEndian.PutUint64(v[16:], k1)
	if err := a.keys.Put(uint32(epoch&1), v); err != nil {
		return fmt.Errorf("SYN answer: write the key of epoch %d: %w", epoch, err)
	}
	return nil
}

// SetCurrent makes epoch's slot the one the program uses, and sets the
// clock: engine time is bpf_ktime_get_ns() - baseNs.
func (a *SYNAnswer) SetCurrent(epoch int64, baseNs uint64) error {
	var v [answerKeySize]byte
	binary.NativeEndian.PutUint64(v[0:], uint64(epoch))
	binary.NativeEndian.PutUint64(v[8:], baseNs)
	if err := a.keys.Put(uint32(answerSlotCur), v); err != nil {
		return fmt.Errorf("SYN answer: set the current epoch: %w", err)
	}
	return nil
}

// AttachIngress runs the program on every frame the device receives,
// until Close: through TCX, or as a clsact filter on kernels without it.
func (a *SYNAnswer) AttachIngress(ifindex int) error {
	l, hook, err := attachTC("SYN answer", "the link's ingress", "qsplice_synans", ifindex, a.prog, true)
	if err != nil {
		return err
	}
	a.attach, a.hook = l, hook
	return nil
}

// Hook says how the program is attached.
func (a *SYNAnswer) Hook() Hook { return a.hook }

// Program is the loaded program (for tests: BPF_PROG_TEST_RUN).
func (a *SYNAnswer) Program() *ebpf.Program { return a.prog }

// Stats sums the program's counters over the CPUs.
func (a *SYNAnswer) Stats() (SYNAnswerStats, error) {
	var per [][answerStatsSize]byte
	if err := a.stats.Lookup(uint32(0), &per); err != nil {
		return SYNAnswerStats{}, err
	}
	var s SYNAnswerStats
	for _, v := range per {
		s.Answered += binary.NativeEndian.Uint64(v[0:])
	}
	return s, nil
}

// Close detaches the program and frees it and its maps.
func (a *SYNAnswer) Close() error {
	var errs []error
	if a.attach != nil {
		errs = append(errs, a.attach.Close())
	}
	if a.prog != nil {
		errs = append(errs, a.prog.Close())
	}
	for _, m := range []*ebpf.Map{a.listen, a.keys, a.stats} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
