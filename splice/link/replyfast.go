package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// The kernel's reply fast path (issue 7).
//
// Every byte a back-end serves crosses the shim twice in userspace: read
// out of the TAP (a copy) and written into the wire's AF_PACKET socket
// (another); on veth that is the floor of the shim's CPU per GB, about a
// third of nginx-as-proxy's (docs/results.md). Yet in the middle of a
// response the shim's translation is the same for every frame: addresses,
// ports, sequence and timestamp offsets, a window shift, the client's MAC.
// ReplyFastPath hands that part to the kernel: a TC program on the TAP's
// egress (TCX) rewrites such a frame in place, a super-frame whole, and
// redirects it to the wire device's egress, so its bytes are never
// copied. Other replies of a spliced connection it may send too, as a
// clone, and then gives the shim the original marked as sent (TTL 0, an
// "echo"; echoProgram): the shim still learns what it must from them (the
// first reply's head, the last one's end) without being on the path of
// their bytes. Everything else goes on to the TAP and the shim as before.
//
// The shim decides what the kernel may take: a connection's entry (the
// config map, written only by the shim's daemon) says how to translate
// and bounds the frames, and the program takes a frame only if all of
// these hold: unfragmented IPv4 without options, TCP with ACK and no
// SYN, RST or URG; payload; a timestamp option, if the connection
// uses timestamps, where Linux puts it (NOP, NOP, TS first); the frame
// ends before RespEnd and carries no FIN (Middle: the frame that
// completes the response is the shim's, which reports the service time),
// or the entry allows echoes (an echo may carry the FIN: a server that
// closes after a short response sends its only reply with it, and the
// shim reads the echo as it would the reply); and no frame the program left to the TAP on that connection
// ends after AllowFrom. The last keeps the
// order of a connection's frames: the ledger map (written only by the
// program) records the highest end of the data frames it left to the
// TAP, and the shim sets AllowFrom to the end of the replies it has
// handled and sent, so a frame still waiting in the TAP's queue keeps the
// fast path shut until the shim has sent it. Checksums are updated with
// bpf_l3_csum_replace and bpf_l4_csum_replace, which keep a partial
// checksum partial (only the addresses change the pseudo-header's sum)
// and update a complete one for every field.

// Offsets of a frame's fields the program reads and writes: Ethernet,
// then IPv4 without options (the program takes no other), then TCP.
const (
	fpIP       = 14
	fpTCP      = fpIP + 20
	fpIPLen    = fpIP + 2
	fpIPFrag   = fpIP + 6
	fpIPProto  = fpIP + 9
	fpIPCsum   = fpIP + 10
	fpIPSrc    = fpIP + 12
	fpIPDst    = fpIP + 16
	fpPorts    = fpTCP
	fpSeq      = fpTCP + 4
	fpAck      = fpTCP + 8
	fpDataOff  = fpTCP + 12
	fpFlags    = fpTCP + 13
	fpWindow   = fpTCP + 14
	fpTCPCsum  = fpTCP + 16
	fpOptions  = fpTCP + 20
	fpTSVal    = fpOptions + 4
	fpMinFrame = fpTCP + 20
	fpTSFrame  = fpOptions + 12
)

// The config map's value, as FastPathEntry encodes it: fields the frame
// takes as they are (addresses, ports, MAC) in network byte order, the
// numbers the program adds or compares in host byte order.
const (
	cfgVIP       = 0
	cfgClient    = 4
	cfgPorts     = 8 // VPort, CPort: the frame's source and destination ports
	cfgSeqDelta  = 12
	cfgTSOffset  = 16
	cfgAllowFrom = 20
	cfgRespEnd   = 24
	cfgMAC       = 28
	cfgShiftL    = 34
	cfgShiftR    = 35
	cfgFlags     = 36
	cfgGen       = 40 // the connection's generation, never 0 (FastPathEntry.Gen)
	cfgAckDelta  = 44 // FastPathEntry.Shift's numbers
	cfgTSEcr     = 48
	cfgSeqFloor  = 52
	cfgSize      = 56

	cfgFlagTS     = 1
	cfgFlagScaled = 2
	cfgFlagMiddle = 4
	cfgFlagEcho   = 8
	cfgFlagShift  = 16
)

// Stack slots of the program (offsets from R10).
const (
	stKey     = -16 // the frame's FastPathKey, 12 bytes
	stEnd     = -20 // the frame's end sequence number, host order
	stLen     = -24 // its payload length
	stOldSrc  = -28
	stOldDst  = -32
	stOldPort = -36
	stOldSeq  = -40
	stOldTS   = -44
	stOldWin  = -48
	stNewSeq  = -52
	stNewTS   = -56
	stNewWin  = -60
	stZero    = -64
	stNewSrc  = -68
	stNewDst  = -72
	stNewPort = -76
	stMode    = -80  // modeMiddle or modeEcho
	stOldMAC  = -88  // 6 bytes
	stOldTTL  = -92  // the IPv4 header's TTL and protocol, as loaded
	stNewTTL  = -96  // the same with TTL 0
	stGen     = -100 // the entry's Gen, 0 without an entry
	stLedger  = -108 // a new ledger value: end, then Gen
	stOldAck  = -112
	stNewAck  = -116
	stOldEcr  = -120
	stNewEcr  = -124
)

// How the program sends a frame it takes.
const (
	modeMiddle = 1 // redirect it; the shim never sees it
	modeEcho   = 2 // send a clone, give the shim the original marked as sent
)

// Return codes of a TC program, and helper flags.
const (
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7      // what bpf_redirect returns
	csumPseudoHdr = 1 << 4 // BPF_F_PSEUDO_HDR
)

// skb field offsets in struct __sk_buff.
const (
	skbData    = 76
	skbDataEnd = 80
)

// ReplyFastStats are the program's counters, summed over CPUs.
type ReplyFastStats struct {
	Frames uint64 // replies in the middle of responses translated and sent by the kernel
	Bytes  uint64 // their payload
	Failed uint64 // translated but a helper failed: dropped
	Echoed uint64 // other replies the kernel sent, whose originals went to the shim
	// Entries is the number of connections the kernel holds an entry for
	// (counted when asked: it should follow the shim's own count).
	Entries int
}

// statsSize is the size of the stats map's value: ReplyFastStats.
const statsSize = 32

// ReplyFastPath is the program with its maps. Safe for concurrent use:
// each connection's entry is written by the worker that owns it.
type ReplyFastPath struct {
	config *ebpf.Map // FastPathKey -> entry, written by the shim
	ledger *ebpf.Map // FastPathKey -> highest end left to the TAP and its Gen, written by the program
	stats  *ebpf.Map // per-CPU ReplyFastStats
	prog   *ebpf.Program
	attach tcAttachment
	hook   Hook
	// noBatch: the kernel refused a batch command (replyfast_batch.go).
	noBatch atomic.Bool
}

// NewReplyFastPath loads the program for a shim whose wire is the device
// with index wireIndex, with room for maxEntries connections. It needs
// CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN).
func NewReplyFastPath(wireIndex, maxEntries int) (*ReplyFastPath, error) {
	f := &ReplyFastPath{}
	var err error
	f.config, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_fpcfg", Type: ebpf.Hash,
		KeySize: uint32(len(wire.FastPathKey{})), ValueSize: cfgSize, MaxEntries: uint32(maxEntries),
	})
	if err != nil {
		return nil, fmt.Errorf("reply fast path: config map: %w", err)
	}
	// Every data frame of every connection leaves its end here, so the
	// map is an LRU: an entry forgotten only reopens the fast path later
	// (a frame that finds none is left to the TAP and makes one).
	f.ledger, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_fpledger", Type: ebpf.LRUHash,
		KeySize: uint32(len(wire.FastPathKey{})), ValueSize: 8, MaxEntries: uint32(4 * maxEntries),
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reply fast path: ledger map: %w", err)
	}
	f.stats, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_fpstats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: statsSize, MaxEntries: 1,
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reply fast path: stats map: %w", err)
	}
	f.prog, err = loadTC("reply fast path", "qsplice_reply", replyFastProgram(f.config.FD(), f.ledger.FD(), f.stats.FD(), wireIndex))
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// AttachEgress runs the program on every frame the device with index
// tapIndex transmits (the back-end's TAP) until Close: through TCX, or on
// a kernel without it (before 6.6) as a clsact filter (Hook says which).
func (f *ReplyFastPath) AttachEgress(tapIndex int) error {
	l, hook, err := attachTC("reply fast path", "the TAP's egress", "qsplice_reply", tapIndex, f.prog, false)
	if err != nil {
		return err
	}
	f.attach, f.hook = l, hook
	return nil
}

// Hook says how the program is attached.
func (f *ReplyFastPath) Hook() Hook { return f.hook }

// FastPathScratch holds a caller's key and value for Put and Delete, so
// that they allocate nothing: one per worker, used by one at a time.
type FastPathScratch struct {
	key wire.FastPathKey
	val [cfgSize]byte
}

// Put installs or replaces k's entry. The frames the kernel takes from
// then on are translated by e; the caller must have sent every reply
// that ends at or before e.AllowFrom already (the order of the wire).
// One bpf(2) call.
func (f *ReplyFastPath) Put(s *FastPathScratch, k wire.FastPathKey, e wire.FastPathEntry) error {
	s.key = k
	encodeFastPathEntry(s.val[:], e)
	return f.update(s)
}

// update writes s's key and encoded value to the config map.
func (f *ReplyFastPath) update(s *FastPathScratch) error {
	return mapElem(unix.BPF_MAP_UPDATE_ELEM, f.config.FD(), unsafe.Pointer(&s.key), unsafe.Pointer(&s.val))
}

// Delete forgets k's entry, if any: its frames go to the TAP again. Its
// ledger stays until the LRU needs the room; the next connection on the
// tuple has another Gen, so the program does not read it. One bpf(2)
// call.
func (f *ReplyFastPath) Delete(s *FastPathScratch, k wire.FastPathKey) error {
	s.key = k
	err := mapElem(unix.BPF_MAP_DELETE_ELEM, f.config.FD(), unsafe.Pointer(&s.key), nil)
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// mapElemAttr is the bpf(2) attribute of the map element commands
// (union bpf_attr: map_fd, key, value or next_key, flags).
type mapElemAttr struct {
	mapFD uint32
	_     uint32
	key   uint64
	value uint64
	flags uint64
}

// mapElem runs a map element command with the raw system call: the
// library's wrappers marshal through interfaces and wrap their errors,
// which allocates on every call, and these run for every connection.
func mapElem(cmd uintptr, fd int, key, value unsafe.Pointer) error {
	attr := mapElemAttr{mapFD: uint32(fd), key: uint64(uintptr(key)), value: uint64(uintptr(value))}
	_, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return errno
	}
	return nil
}

// Stats sums the program's counters over the CPUs.
func (f *ReplyFastPath) Stats() (ReplyFastStats, error) {
	var per [][statsSize]byte
	if err := f.stats.Lookup(uint32(0), &per); err != nil {
		return ReplyFastStats{}, err
	}
	var s ReplyFastStats
	for _, v := range per {
		s.Frames += binary.NativeEndian.Uint64(v[statFrames:])
		s.Bytes += binary.NativeEndian.Uint64(v[statBytes:])
		s.Failed += binary.NativeEndian.Uint64(v[statFailed:])
		s.Echoed += binary.NativeEndian.Uint64(v[statEchoed:])
	}
	var k wire.FastPathKey
	var v [cfgSize]byte
	it := f.config.Iterate()
	for it.Next(&k, &v) {
		s.Entries++
	}
	if err := it.Err(); err != nil {
		return s, err
	}
	return s, nil
}

// Program is the loaded program (for tests: BPF_PROG_TEST_RUN).
func (f *ReplyFastPath) Program() *ebpf.Program { return f.prog }

// Close detaches the program and frees the maps.
func (f *ReplyFastPath) Close() error {
	var errs []error
	if f.attach != nil {
		errs = append(errs, f.attach.Close())
	}
	if f.prog != nil {
		errs = append(errs, f.prog.Close())
	}
	for _, m := range []*ebpf.Map{f.config, f.ledger, f.stats} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// encodeFastPathEntry writes e as the config map's value.
func encodeFastPathEntry(v []byte, e wire.FastPathEntry) {
	clear(v[:cfgSize])
	copy(v[cfgVIP:], e.VIP[:])
	copy(v[cfgClient:], e.Client[:])
	binary.BigEndian.PutUint16(v[cfgPorts:], e.VPort)
	binary.BigEndian.PutUint16(v[cfgPorts+2:], e.CPort)
	binary.NativeEndian.PutUint32(v[cfgSeqDelta:], e.SeqDelta)
	binary.NativeEndian.PutUint32(v[cfgTSOffset:], e.TSOffset)
	binary.NativeEndian.PutUint32(v[cfgAllowFrom:], uint32(e.AllowFrom))
	binary.NativeEndian.PutUint32(v[cfgRespEnd:], uint32(e.RespEnd))
	copy(v[cfgMAC:], e.ClientMAC[:])
	if e.WindowShift > 0 {
		v[cfgShiftL] = byte(e.WindowShift)
	} else {
		v[cfgShiftR] = byte(-e.WindowShift)
	}
	if e.TS {
		v[cfgFlags] |= cfgFlagTS
	}
	if e.Scaled {
		v[cfgFlags] |= cfgFlagScaled
	}
	if e.Middle {
		v[cfgFlags] |= cfgFlagMiddle
	}
	if e.Echo {
		v[cfgFlags] |= cfgFlagEcho
	}
	binary.NativeEndian.PutUint32(v[cfgGen:], max(e.Gen, 1))
	if e.Shift {
		v[cfgFlags] |= cfgFlagShift
		binary.NativeEndian.PutUint32(v[cfgAckDelta:], e.AckDelta)
		binary.NativeEndian.PutUint32(v[cfgTSEcr:], e.TSEcrDelta)
		binary.NativeEndian.PutUint32(v[cfgSeqFloor:], uint32(e.SeqFloor))
	}
}

// be16 and be32 are the values a native load of the given network-order
// bytes gives, for comparing packet fields without swapping them.
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

func be32(v uint32) int32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return int32(binary.NativeEndian.Uint32(b[:]))
}

// replyFastProgram is the TC program. Registers: R6 the skb, R7 the
// frame's first byte, R8 its end and then the config entry, R9 the
// payload length (kept on the stack) and then the entry's flags. Every path that has not yet
// written the frame may leave it to the TAP (label "punt", which records
// the frame in the ledger, or "pass" before the key is known).
func replyFastProgram(config, ledger, stats, wireIndex int) asm.Instructions {
	const (
		ethIPv4  = 0x0800
		tsWord   = 0x0101080a // NOP, NOP, kind 8, length 10
		flagFIN  = 0x01
		flagsBad = 0x02 | 0x04 | 0x20
		flagACK  = 0x10
	)
	csum := func(helper asm.BuiltinFunc, off int32, from, to int16, flags int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, off),
			asm.LoadMem(asm.R3, asm.RFP, from, asm.Word),
			asm.LoadMem(asm.R4, asm.RFP, to, asm.Word),
			asm.Mov.Imm(asm.R5, flags),
			helper.Call(),
			asm.JNE.Imm(asm.R0, 0, "failed"),
		}
	}
	in := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, fpMinFrame),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
		asm.LoadMem(asm.R0, asm.R7, 12, asm.Half),
		asm.JNE.Imm(asm.R0, be16(ethIPv4), "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpIP, asm.Byte),
		asm.JNE.Imm(asm.R0, 0x45, "pass"), // IPv4, no options
		asm.LoadMem(asm.R0, asm.R7, fpIPProto, asm.Byte),
		asm.JNE.Imm(asm.R0, 6, "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpIPFrag, asm.Half),
		asm.JSet.Imm(asm.R0, be16(0x3fff), "pass"), // MF or an offset
		// Payload length: IPv4 total length less both headers.
		asm.LoadMem(asm.R9, asm.R7, fpIPLen, asm.Half),
		asm.HostTo(asm.BE, asm.R9, asm.Half),
		asm.LoadMem(asm.R0, asm.R7, fpDataOff, asm.Byte),
		asm.RSh.Imm(asm.R0, 4),
		asm.LSh.Imm(asm.R0, 2),
		asm.Sub.Imm(asm.R9, 20),
		asm.Sub.Reg(asm.R9, asm.R0),
		asm.JSLE.Imm(asm.R9, 0, "pass"), // no payload (or a length that lies)
		asm.StoreMem(asm.RFP, stLen, asm.R9, asm.Word),
		// The key: addresses and ports as they are in the frame.
		asm.LoadMem(asm.R1, asm.R7, fpIPSrc, asm.Word),
		asm.StoreMem(asm.RFP, stKey, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, fpIPDst, asm.Word),
		asm.StoreMem(asm.RFP, stKey+4, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, fpPorts, asm.Word),
		asm.StoreMem(asm.RFP, stKey+8, asm.R1, asm.Word),
		// The frame's end: sequence number plus payload, in 32 bits.
		asm.LoadMem(asm.R1, asm.R7, fpSeq, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.Add.Reg32(asm.R1, asm.R9),
		asm.StoreMem(asm.RFP, stEnd, asm.R1, asm.Word),
		asm.StoreImm(asm.RFP, stGen, 0, asm.Word),
		// Flags: ACK, and none of SYN, RST, URG (a FIN only in an echo,
		// below).
		asm.LoadMem(asm.R0, asm.R7, fpFlags, asm.Byte),
		asm.JSet.Imm(asm.R0, flagsBad, "punt"),
		asm.JSet.Imm(asm.R0, flagACK, "acked"),
		asm.Ja.Label("punt"),
		// The connection's entry.
		asm.LoadMapPtr(asm.R1, config).WithSymbol("acked"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "punt"),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.LoadMem(asm.R1, asm.R8, cfgGen, asm.Word),
		asm.StoreMem(asm.RFP, stGen, asm.R1, asm.Word),
		// The entry's flags, loaded once: the entry may change under
		// the program, and the writes below must follow the checks.
		asm.LoadMem(asm.R9, asm.R8, cfgFlags, asm.Byte),
		// A pooled C2's reply from before it moved to this client
		// (s32)(seq - SeqFloor) < 0 is the shim's, which drops it.
		asm.JSet.Imm(asm.R9, cfgFlagShift, "floor"),
		asm.Ja.Label("mode"),
		asm.LoadMem(asm.R1, asm.R7, fpSeq, asm.Word).WithSymbol("floor"),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.LoadMem(asm.R2, asm.R8, cfgSeqFloor, asm.Word),
		asm.Sub.Reg32(asm.R1, asm.R2),
		asm.JSLT.Imm32(asm.R1, 0, "punt"),
		// The mode: in the middle of the response, (s32)(RespEnd -
		// end) > 0, the kernel's alone; otherwise an echo, if allowed.
		asm.JSet.Imm(asm.R9, cfgFlagMiddle, "middle").WithSymbol("mode"),
		asm.Ja.Label("notmiddle"),
		asm.LoadMem(asm.R0, asm.R7, fpFlags, asm.Byte).WithSymbol("middle"),
		asm.JSet.Imm(asm.R0, flagFIN, "notmiddle"),
		asm.LoadMem(asm.R2, asm.R8, cfgRespEnd, asm.Word),
		asm.LoadMem(asm.R3, asm.RFP, stEnd, asm.Word),
		asm.Sub.Reg32(asm.R2, asm.R3),
		asm.JSLE.Imm32(asm.R2, 0, "notmiddle"),
		asm.StoreImm(asm.RFP, stMode, modeMiddle, asm.Word),
		asm.Ja.Label("options"),
		asm.JSet.Imm(asm.R9, cfgFlagEcho, "echo").WithSymbol("notmiddle"),
		asm.Ja.Label("punt"),
		asm.StoreImm(asm.RFP, stMode, modeEcho, asm.Word).WithSymbol("echo"),
		// The timestamp option where Linux puts it, if in use.
		asm.JSet.Imm(asm.R9, cfgFlagTS, "ts").WithSymbol("options"),
		asm.Ja.Label("ledger"),
		asm.LoadMem(asm.R0, asm.R7, fpDataOff, asm.Byte).WithSymbol("ts"),
		asm.RSh.Imm(asm.R0, 4),
		asm.JNE.Imm(asm.R0, 8, "punt"),
		asm.LoadMem(asm.R2, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, fpTSFrame),
		asm.JGT.Reg(asm.R1, asm.R2, "punt"),
		asm.LoadMem(asm.R0, asm.R7, fpOptions, asm.Word),
		asm.JNE.Imm(asm.R0, be32(tsWord), "punt"),
		// Nothing of this connection waits in the TAP past AllowFrom:
		// (s32)(AllowFrom - ledger) >= 0. The ledger counts if it is
		// this entry's (its Gen) or was made before any entry (Gen 0);
		// one of another connection on the tuple does not, nor a ledger
		// that is not there: no data frame of this connection was left
		// to the TAP.
		asm.LoadMapPtr(asm.R1, ledger).WithSymbol("ledger"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "write"),
		asm.LoadMem(asm.R1, asm.R0, 4, asm.Word),
		asm.JEq.Imm(asm.R1, 0, "ours"),
		asm.LoadMem(asm.R2, asm.RFP, stGen, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R2, "write"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word).WithSymbol("ours"),
		asm.LoadMem(asm.R2, asm.R8, cfgAllowFrom, asm.Word),
		asm.Sub.Reg32(asm.R2, asm.R1),
		asm.JSLT.Imm32(asm.R2, 0, "punt"),
		// The frame is the kernel's. Write it; map lookups keep the
		// packet pointer valid, so R7 still is. The old values go to
		// the stack for the checksum helpers, which come last (they
		// invalidate it).
		asm.LoadMem(asm.R1, asm.R7, 0, asm.Word).WithSymbol("write"),
		asm.StoreMem(asm.RFP, stOldMAC, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, 4, asm.Half),
		asm.StoreMem(asm.RFP, stOldMAC+4, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.R7, fpIP+8, asm.Half),
		asm.StoreMem(asm.RFP, stOldTTL, asm.R1, asm.Word),
		asm.And.Imm(asm.R1, be16(0x00ff)), // TTL 0, the protocol kept
		asm.StoreMem(asm.RFP, stNewTTL, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R8, cfgMAC, asm.Word),
		asm.StoreMem(asm.R7, 0, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R8, cfgMAC+4, asm.Half),
		asm.StoreMem(asm.R7, 4, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.R7, fpIPSrc, asm.Word),
		asm.StoreMem(asm.RFP, stOldSrc, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, fpIPDst, asm.Word),
		asm.StoreMem(asm.RFP, stOldDst, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, fpPorts, asm.Word),
		asm.StoreMem(asm.RFP, stOldPort, asm.R1, asm.Word),
		// The new values go to the stack too: the checksums must be
		// updated to what was written, whatever the entry holds by then.
		asm.LoadMem(asm.R1, asm.R8, cfgVIP, asm.Word),
		asm.StoreMem(asm.R7, fpIPSrc, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, stNewSrc, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R8, cfgClient, asm.Word),
		asm.StoreMem(asm.R7, fpIPDst, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, stNewDst, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R8, cfgPorts, asm.Word),
		asm.StoreMem(asm.R7, fpPorts, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, stNewPort, asm.R1, asm.Word),
		// Sequence number.
		asm.LoadMem(asm.R1, asm.R7, fpSeq, asm.Word),
		asm.StoreMem(asm.RFP, stOldSeq, asm.R1, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.LoadMem(asm.R2, asm.R8, cfgSeqDelta, asm.Word),
		asm.Add.Reg32(asm.R1, asm.R2),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.StoreMem(asm.R7, fpSeq, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, stNewSeq, asm.R1, asm.Word),
		// A pooled C2's ACK number, into the client's numbers.
		asm.JSet.Imm(asm.R9, cfgFlagShift, "writeack"),
		asm.Ja.Label("tsval"),
	}
	in = append(in, subtractField("writeack", fpAck, cfgAckDelta, stOldAck, stNewAck)...)
	in = append(in, asm.Instructions{
		// TSval, in the place checked above.
		asm.JSet.Imm(asm.R9, cfgFlagTS, "writets").WithSymbol("tsval"),
		asm.Ja.Label("window"),
		asm.LoadMem(asm.R2, asm.R6, skbDataEnd, asm.Word).WithSymbol("writets"),
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, fpTSFrame),
		asm.JGT.Reg(asm.R1, asm.R2, "failed"), // checked above; the verifier wants it here
		asm.LoadMem(asm.R1, asm.R7, fpTSVal, asm.Word),
		asm.StoreMem(asm.RFP, stOldTS, asm.R1, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.LoadMem(asm.R2, asm.R8, cfgTSOffset, asm.Word),
		asm.Add.Reg32(asm.R1, asm.R2),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.StoreMem(asm.R7, fpTSVal, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, stNewTS, asm.R1, asm.Word),
		// A pooled C2's TS echo, into the client's clock.
		asm.JSet.Imm(asm.R9, cfgFlagShift, "writeecr"),
		asm.Ja.Label("window"),
	}...)
	in = append(in, subtractField("writeecr", fpTSVal+4, cfgTSEcr, stOldEcr, stNewEcr)...)
	in = append(in, asm.Instructions{
		// Window: win << L >> R, 65535 at most, never 0 from non-zero
		// (rescaleWindow).
		asm.JSet.Imm(asm.R9, cfgFlagScaled, "scale").WithSymbol("window"),
		asm.Ja.Label("sums"),
		asm.LoadMem(asm.R1, asm.R7, fpWindow, asm.Half).WithSymbol("scale"),
		asm.StoreMem(asm.RFP, stOldWin, asm.R1, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.Mov.Reg(asm.R3, asm.R1),
		asm.LoadMem(asm.R2, asm.R8, cfgShiftL, asm.Byte),
		asm.LSh.Reg(asm.R1, asm.R2),
		asm.LoadMem(asm.R2, asm.R8, cfgShiftR, asm.Byte),
		asm.RSh.Reg(asm.R1, asm.R2),
		asm.JLE.Imm(asm.R1, 0xffff, "notbig"),
		asm.Mov.Imm(asm.R1, 0xffff),
		asm.JNE.Imm(asm.R1, 0, "scaled").WithSymbol("notbig"),
		asm.JEq.Imm(asm.R3, 0, "scaled"),
		asm.Mov.Imm(asm.R1, 1),
		asm.HostTo(asm.BE, asm.R1, asm.Half).WithSymbol("scaled"),
		asm.StoreMem(asm.R7, fpWindow, asm.R1, asm.Half),
		asm.StoreMem(asm.RFP, stNewWin, asm.R1, asm.Word),
	}...)
	sums := fieldSums(csum, true, "", "count")
	sums[0] = sums[0].WithSymbol("sums")
	out := asm.Instructions{
		asm.LoadMem(asm.R1, asm.RFP, stMode, asm.Word).WithSymbol("count"),
		asm.JEq.Imm(asm.R1, modeEcho, "clone"),
	}
	// In the middle: count it and send it out of the wire device.
	out = append(out, statsValue(stats, "redirect")...)
	out = append(out, addOne(statFrames)...)
	out = append(out,
		asm.LoadMem(asm.R1, asm.R0, statBytes, asm.DWord),
		asm.LoadMem(asm.R2, asm.RFP, stLen, asm.Word),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.R0, statBytes, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, int32(wireIndex)).WithSymbol("redirect"),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	)
	// A helper failed after the frame was written: it can go neither
	// out nor to the shim. Drop and count it.
	failed := statsValue(stats, "shot")
	failed[0] = failed[0].WithSymbol("failed")
	out = append(out, failed...)
	out = append(out, addOne(statFailed)...)
	out = append(out,
		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("shot"),
		asm.Return(),

		// Left to the TAP: record its end in the ledger first, with the
		// entry's Gen (0 without one). A ledger of another Gen is
		// another connection's, or made before the entry: start afresh.
		asm.LoadMapPtr(asm.R1, ledger).WithSymbol("punt"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "newledger"),
		asm.LoadMem(asm.R2, asm.RFP, stEnd, asm.Word),
		asm.LoadMem(asm.R1, asm.R0, 4, asm.Word),
		asm.LoadMem(asm.R3, asm.RFP, stGen, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R3, "restart"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.Sub.Reg32(asm.R3, asm.R1),
		asm.JSLE.Imm32(asm.R3, 0, "pass"),
		asm.StoreMem(asm.R0, 0, asm.R2, asm.Word),
		asm.Ja.Label("pass"),
		asm.StoreMem(asm.R0, 0, asm.R2, asm.Word).WithSymbol("restart"),
		asm.StoreMem(asm.R0, 4, asm.R3, asm.Word),
		asm.Ja.Label("pass"),
		asm.LoadMem(asm.R1, asm.RFP, stEnd, asm.Word).WithSymbol("newledger"),
		asm.StoreMem(asm.RFP, stLedger, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, stGen, asm.Word),
		asm.StoreMem(asm.RFP, stLedger+4, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, ledger),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stLedger),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, tcActOK).WithSymbol("pass"),
		asm.Return(),
	)
	prog := append(in, sums...)
	prog = append(prog, out...) // "count" follows the checksums
	return append(prog, echoProgram(wireIndex, stats, csum)...)
}

// subtractField rewrites the 32-bit field at off of a pooled C2's reply
// (R7 the frame, R8 the entry): less the entry's value at cfg, the old
// and new values kept in oldSlot and newSlot for the checksums. Its
// first instruction carries label.
func subtractField(label string, off, cfg, oldSlot, newSlot int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R7, off, asm.Word).WithSymbol(label),
		asm.StoreMem(asm.RFP, oldSlot, asm.R1, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.LoadMem(asm.R2, asm.R8, cfg, asm.Word),
		asm.Sub.Reg32(asm.R1, asm.R2),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.StoreMem(asm.R7, off, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, newSlot, asm.R1, asm.Word),
	}
}

// csumFunc emits one checksum helper call (replyFastProgram's csum).
type csumFunc func(helper asm.BuiltinFunc, off int32, from, to int16, flags int32) asm.Instructions

// fieldSums updates the checksums for every field the program rewrites:
// the IPv4 header's for the addresses, TCP's for the addresses as
// pseudo-header fields and for the rest as plain ones (the TSval and the
// window only when the entry's flags in R9 say they were rewritten).
// Forward goes from the old values on the stack to the new, after a
// translation; backward from the new to the old, after a restore. Each
// helper takes the values as they sit in the frame (a 16-bit one in the
// low half of its stack word). The labels it makes start with prefix; it
// ends by going on to done. Its first instruction is a no-op, to carry a
// label.
func fieldSums(csum csumFunc, forward bool, prefix, done string) asm.Instructions {
	sum := func(helper asm.BuiltinFunc, off int32, oldSlot, newSlot int16, flags int32) asm.Instructions {
		if forward {
			return csum(helper, off, oldSlot, newSlot, flags)
		}
		return csum(helper, off, newSlot, oldSlot, flags)
	}
	p := asm.Instructions{asm.Mov.Imm(asm.R0, 0)}
	p = append(p, sum(asm.FnL3CsumReplace, fpIPCsum, stOldSrc, stNewSrc, 4)...)
	p = append(p, sum(asm.FnL3CsumReplace, fpIPCsum, stOldDst, stNewDst, 4)...)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldSrc, stNewSrc, csumPseudoHdr|4)...)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldDst, stNewDst, csumPseudoHdr|4)...)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldPort, stNewPort, 4)...)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldSeq, stNewSeq, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagShift, prefix+"sumack"),
		asm.Ja.Label(prefix+"sumtsq"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(prefix+"sumack"),
	)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldAck, stNewAck, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagTS, prefix+"sumts").WithSymbol(prefix+"sumtsq"),
		asm.Ja.Label(prefix+"sumwin"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(prefix+"sumts"),
	)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldTS, stNewTS, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagShift, prefix+"sumecr"),
		asm.Ja.Label(prefix+"sumwin"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(prefix+"sumecr"),
	)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldEcr, stNewEcr, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagScaled, prefix+"sumscale").WithSymbol(prefix+"sumwin"),
		asm.Ja.Label(done),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(prefix+"sumscale"),
	)
	p = append(p, sum(asm.FnL4CsumReplace, fpTCPCsum, stOldWin, stNewWin, 2)...)
	return append(p, asm.Ja.Label(done))
}

// echoProgram sends a clone of the translated frame out of the wire
// device, then puts the original back as it was, marks it as sent (TTL
// 0) and leaves it to the TAP: the shim learns from it what it learns
// from every reply (the response's head, its end, the front-end's copy)
// but does not send it. A clone that could not be sent leaves the
// original unmarked, for the shim to send, and recorded in the ledger
// like any frame left to it. Packet pointers are invalid here (the
// checksum helpers ran): every write goes through bpf_skb_store_bytes,
// which also unshares the header the clone still points at.
func echoProgram(wireIndex, stats int, csum csumFunc) asm.Instructions {
	store := func(off int32, from int16, n int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, off),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, int32(from)),
			asm.Mov.Imm(asm.R4, n),
			asm.Mov.Imm(asm.R5, 0),
			asm.FnSkbStoreBytes.Call(),
			asm.JNE.Imm(asm.R0, 0, "failed"),
		}
	}
	p := asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("clone"),
		asm.Mov.Imm(asm.R2, int32(wireIndex)),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnCloneRedirect.Call(),
		asm.StoreMem(asm.RFP, stMode, asm.R0, asm.Word), // 0: sent
	}
	p = append(p, store(0, stOldMAC, 6)...)
	p = append(p, store(fpIPSrc, stOldSrc, 4)...)
	p = append(p, store(fpIPDst, stOldDst, 4)...)
	p = append(p, store(fpPorts, stOldPort, 4)...)
	p = append(p, store(fpSeq, stOldSeq, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagShift, "unack"),
		asm.Ja.Label("untsq"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("unack"),
	)
	p = append(p, store(fpAck, stOldAck, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagTS, "unts").WithSymbol("untsq"),
		asm.Ja.Label("unwin"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("unts"),
	)
	p = append(p, store(fpTSVal, stOldTS, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagShift, "unecr"),
		asm.Ja.Label("unwin"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("unecr"),
	)
	p = append(p, store(fpTSVal+4, stOldEcr, 4)...)
	p = append(p,
		asm.JSet.Imm(asm.R9, cfgFlagScaled, "unscale").WithSymbol("unwin"),
		asm.Ja.Label("unsums"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("unscale"),
	)
	p = append(p, store(fpWindow, stOldWin, 2)...)
	back := fieldSums(csum, false, "un", "mark")
	back[0] = back[0].WithSymbol("unsums")
	p = append(p, back...)
	p = append(p,
		asm.LoadMem(asm.R1, asm.RFP, stMode, asm.Word).WithSymbol("mark"),
		asm.JNE.Imm(asm.R1, 0, "punt"), // not sent: the shim's, as any frame left to it
	)
	p = append(p, store(fpIP+8, stNewTTL, 2)...)
	p = append(p, csum(asm.FnL3CsumReplace, fpIPCsum, stOldTTL, stNewTTL, 2)...)
	p = append(p, statsValue(stats, "pass")...)
	p = append(p, addOne(statEchoed)...)
	return append(p, asm.Ja.Label("pass"))
}

// Offsets of ReplyFastStats' counters in the stats map's value.
const (
	statFrames = 0
	statBytes  = 8
	statFailed = 16
	statEchoed = 24
)

// statsValue points R0 at this CPU's counters, or goes on at missing
// if the map has none (it always has: one slot per CPU).
func statsValue(stats int, missing string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, stZero, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, stats),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stZero),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, missing),
	}
}

// addOne adds one to the counter at off of the value R0 points at (a
// per-CPU value: no other program writes it meanwhile).
func addOne(off int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R0, off, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, off, asm.R1, asm.DWord),
	}
}
