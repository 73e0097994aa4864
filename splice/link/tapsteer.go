package link

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// Steering a multi-queue TAP by ports (issue 7).
//
// A back-end's shim has one worker per TAP queue and per member of its
// wire's FanoutPorts group, and a connection belongs to the worker its
// wire frames reach: member wire.PortsHash(sport, dport) % n. Without a
// steering program the tun driver picks the queue of a frame the kernel
// sends by its flow table, which learns a flow only from frames written
// into the device, and after the write returns: the SYN-ACK to a SYN the
// shim writes (and everything the kernel sends on a flow it has not yet
// learnt, or forgot after 3 s) goes to the queue of the kernel's own
// hash, which is another worker's half the time with two. The worker
// that reads such a frame hands it over (a copy, a mailbox, a wake-up),
// and the owner may read the server's reply, on its own queue, before
// the SYN-ACK that installs its Splice (splice/shim_fastopen.go holds it
// then). Measured with one connection per request, 16 concurrent, two
// workers: 43% of the TAP's frames were handed over, and a burst of
// them overran the hand-over buffers, the dropped frames costing their
// connections a retransmission timeout (0.2 to 1.2 s; docs/results.md).
//
// TUNSETSTEERINGEBPF takes the choice away from the flow table: an eBPF
// socket-filter program run on every frame the device transmits returns
// the queue (modulo the number of queues). SteerByPorts attaches one that
// computes FanoutPorts' function, so every frame of a connection is read
// by the worker that owns it, the SYN-ACK and the reply in the order the
// kernel sent them. The tun driver keeps a reference to the program, which
// stays attached until the device goes away.

// steerPortsProgram computes, like fanoutPortsProgram,
// wire.PortsHash(sport, dport) for an unfragmented IPv4 TCP segment and 0
// for anything else. Packet loads are relative to the network header
// (skfNetOff), as in the fanout program; a load that fails ends the
// program with 0.
func steerPortsProgram() asm.Instructions {
	var ipv4 [2]byte // __sk_buff.protocol holds the EtherType in network order
	binary.BigEndian.PutUint16(ipv4[:], etherTypeIP4)
	mul := uint32(wire.PortsHashMul) // the immediate is 32 bits; so is the product kept
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // LD_ABS and LD_IND read the skb in R6
		asm.LoadMem(asm.R0, asm.R6, skBuffProtocol, asm.Word),
		asm.JNE.Imm(asm.R0, int32(binary.NativeEndian.Uint16(ipv4[:])), "other"),
		asm.LoadAbs(netOffset(9), asm.Byte), // IPv4 protocol
		asm.JNE.Imm(asm.R0, unix.IPPROTO_TCP, "other"),
		asm.LoadAbs(netOffset(6), asm.Half),   // flags and fragment offset
		asm.JSet.Imm(asm.R0, 0x3fff, "other"), // MF or an offset: no ports in every fragment
		asm.LoadAbs(netOffset(0), asm.Byte),   // version and header length:
		asm.And.Imm(asm.R0, 0x0f),
		asm.LSh.Imm(asm.R0, 2),                              // the header's length in bytes,
		asm.Mov.Reg(asm.R7, asm.R0),                         // the index of the port loads
		asm.LoadInd(asm.R0, asm.R7, netOffset(0), asm.Half), // source port
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.LoadInd(asm.R0, asm.R7, netOffset(2), asm.Half), // destination port
		asm.Xor.Reg32(asm.R0, asm.R8),
		asm.Mul.Imm32(asm.R0, int32(mul)), // wire.PortsHash, in 32 bits
		asm.RSh.Imm32(asm.R0, 16),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("other"),
		asm.Return(),
	}
}

// skBuffProtocol is the offset of protocol in struct __sk_buff.
const skBuffProtocol = 16

func netOffset(k int) int32 { return int32(skfNetOff + k) }

// SteerByPorts attaches to t's device a steering program that sends each
// frame the kernel transmits on it to queue wire.PortsHash(sport, dport)
// % queues for an unfragmented IPv4 TCP segment, and to queue 0 for
// anything else: the worker FanoutShard names for the same frame on the
// wire. Queue i is the i-th queue OpenOffloadTAP attached (OffloadTAP.Queue).
// It needs CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN); on an error the
// device keeps the tun driver's flow steering.
func (t *OffloadTAP) SteerByPorts() error {
	prog, err := loadSteerProgram()
	if err != nil {
		return fmt.Errorf("tap %s: load the steering program: %w", t.name, err)
	}
	// The device takes its own reference; ours goes with the Program.
	defer prog.Close()
	if err := unix.IoctlSetPointerInt(t.fd, unix.TUNSETSTEERINGEBPF, prog.FD()); err != nil {
		return fmt.Errorf("tap %s: TUNSETSTEERINGEBPF: %w", t.name, err)
	}
	return nil
}

// loadSteerProgram loads steerPortsProgram into the kernel.
func loadSteerProgram() (*ebpf.Program, error) {
	return ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name:         "qsplice_steer",
		Type:         ebpf.SocketFilter,
		License:      "Dual MIT/GPL",
		Instructions: steerPortsProgram(),
	}, ebpf.ProgramOptions{})
}
