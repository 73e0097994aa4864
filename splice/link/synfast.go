package link

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The kernel's SYN fast path (issue 7).
//
// A new connection's first byte waits, among other things, for the
// front-end's C2 SYN to cross the shim: the shim's worker wakes on the
// wire, reads the SYN and writes it to the TAP, about 60 us on the lab
// host of the 200 the first byte takes over a direct connection. The
// front-end's SYN carries the back-end kernel's Fast Open cookie and the
// request itself (splice.FrontEndConfig.FastOpenInSYN), so the shim has
// nothing to change in it. SYNFastPath is a TC program on the wire
// device's ingress that hands every such frame, a SYN with data, into
// the TAP's ingress (bpf_redirect with BPF_F_INGRESS): the back-end's
// kernel receives it as if the shim had written it, without the wake-up.
//
// The shim still sees the frame: AF_PACKET delivers a frame to its
// sockets before tc ingress runs, and the engine learns from its copy
// (splice.ShimConfig.KernelSYNs: it writes no SYN with data itself). So
// the program must take no frame the engine would refuse: its rule is
// the shim's ingress checks for such a frame (splice/ingress.go,
// refuseFromWire) -- IPv4 without options, not a fragment, TCP to the
// host's address, TTL above 0, a unicast source MAC, a source neither
// martian (0/8, 127/8, 224/4, 240/4) nor the host's own -- and SYN
// without ACK, RST or FIN, with payload, and an IPv4 length that fits the
// frame. The checksums it leaves to the kernel, which verifies them
// itself: a corrupted SYN is dropped there as the shim would drop it.
// Every other frame goes on (TC_ACT_OK) to the shim's socket's path as
// before. The program keeps no state; its counters are per CPU.

// SYNFastStats are the SYN fast path's counters, summed over CPUs.
type SYNFastStats struct {
	Frames uint64 // SYNs with data handed to the TAP
	Bytes  uint64 // their payload
}

// synStatsSize is the size of the stats map's value: SYNFastStats.
const synStatsSize = 16

// SYNFastPath is the program and its counters.
type SYNFastPath struct {
	stats  *ebpf.Map
	prog   *ebpf.Program
	attach tcAttachment
	hook   Hook
}

// NewSYNFastPath loads the program for a back-end whose kernel has the
// address hostIP behind the TAP with index tapIndex. It needs CAP_BPF.
func NewSYNFastPath(hostIP [4]byte, tapIndex int) (*SYNFastPath, error) {
	f := &SYNFastPath{}
	var err error
	f.stats, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "qsplice_synstat", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: synStatsSize, MaxEntries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("SYN fast path: stats map: %w", err)
	}
	f.prog, err = loadTC("SYN fast path", "qsplice_syn", synFastProgram(binary.NativeEndian.Uint32(hostIP[:]), tapIndex, f.stats.FD()))
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// AttachIngress runs the program on every frame the device with index
// wireIndex receives (the shim's wire) until Close: through TCX, or on a
// kernel without it (before 6.6) as a clsact filter (Hook says which).
func (f *SYNFastPath) AttachIngress(wireIndex int) error {
	l, hook, err := attachTC("SYN fast path", "the wire's ingress", "qsplice_syn", wireIndex, f.prog, true)
	if err != nil {
		return err
	}
	f.attach, f.hook = l, hook
	return nil
}

// Hook says how the program is attached.
func (f *SYNFastPath) Hook() Hook { return f.hook }

// Stats sums the program's counters over the CPUs.
func (f *SYNFastPath) Stats() (SYNFastStats, error) {
	var per [][synStatsSize]byte
	if err := f.stats.Lookup(uint32(0), &per); err != nil {
		return SYNFastStats{}, err
	}
	var s SYNFastStats
	for _, v := range per {
		s.Frames += binary.NativeEndian.Uint64(v[0:])
		s.Bytes += binary.NativeEndian.Uint64(v[8:])
	}
	return s, nil
}

// Program is the loaded program (for tests: BPF_PROG_TEST_RUN).
func (f *SYNFastPath) Program() *ebpf.Program { return f.prog }

// Close detaches the program and frees it and its map.
func (f *SYNFastPath) Close() error {
	var errs []error
	if f.attach != nil {
		errs = append(errs, f.attach.Close())
	}
	if f.prog != nil {
		errs = append(errs, f.prog.Close())
	}
	if f.stats != nil {
		errs = append(errs, f.stats.Close())
	}
	return errors.Join(errs...)
}

// synFastProgram is the TC program: hostWord is the host's address as a
// native load of its four bytes gives it. Registers: R6 the skb, R7 the
// frame's first byte, R8 its end, R9 the payload length.
func synFastProgram(hostWord uint32, tapIndex, stats int) asm.Instructions {
	const (
		fIngress   = 1 // BPF_F_INGRESS
		stSYNZero  = -4
		synMinSize = fpTCP + 20
		skbLen     = 0 // struct __sk_buff's len: the whole frame's
	)
	in := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, synMinSize),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
	}
	in = append(in, wireSYNChecks("pass")...)
	return append(in,
		asm.LoadMem(asm.R0, asm.R7, fpIPDst, asm.Word),
		asm.JNE.Imm32(asm.R0, int32(hostWord), "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpIPSrc, asm.Word),
		asm.JEq.Imm32(asm.R0, int32(hostWord), "pass"), // the host's own address
		// The IPv4 length must fit the frame (skb->len: arithmetic on
		// packet pointers needs CAP_PERFMON, which the shim does not
		// have), and leave payload after both headers.
		asm.LoadMem(asm.R9, asm.R7, fpIPLen, asm.Half),
		asm.HostTo(asm.BE, asm.R9, asm.Half),
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.Mov.Reg(asm.R3, asm.R9),
		asm.Add.Imm(asm.R3, fpIP),
		asm.JGT.Reg(asm.R3, asm.R2, "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpDataOff, asm.Byte),
		asm.RSh.Imm(asm.R0, 4),
		asm.JLT.Imm(asm.R0, 5, "pass"),
		asm.LSh.Imm(asm.R0, 2),
		asm.Sub.Imm(asm.R9, 20),
		asm.Sub.Reg(asm.R9, asm.R0),
		asm.JSLE.Imm(asm.R9, 0, "pass"),
		// Count it, then hand it to the TAP's ingress.
		asm.StoreImm(asm.RFP, stSYNZero, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, stats),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stSYNZero),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "redirect"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R9),
		asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, int32(tapIndex)).WithSymbol("redirect"),
		asm.Mov.Imm(asm.R2, fIngress),
		asm.FnRedirect.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcActOK).WithSymbol("pass"),
		asm.Return(),
	)
}
