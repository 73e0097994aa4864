package link

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	ebpflink "github.com/cilium/ebpf/link"
)

// What the kernel's fast paths (replyfast.go, synfast.go) share: loading
// a TC program written with the assembler, and attaching it through TCX.

// loadTC loads insns as a TC (SchedCLS) program called name; what names
// the fast path in errors, which carry the verifier's log when it
// refuses the program.
func loadTC(what, name string, insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: insns,
	}, ebpf.ProgramOptions{})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%s: the verifier refused the program: %+v", what, ve)
		}
		return nil, fmt.Errorf("%s: load the program: %w", what, err)
	}
	return prog, nil
}

// attachTCX runs prog at attach (ingress or egress) of the device with
// index ifindex, through a TCX link (Linux 6.6 or later); where names
// the place in errors.
func attachTCX(what, where string, ifindex int, prog *ebpf.Program, attach ebpf.AttachType) (ebpflink.Link, error) {
	l, err := ebpflink.AttachTCX(ebpflink.TCXOptions{Interface: ifindex, Program: prog, Attach: attach})
	if err != nil {
		return nil, fmt.Errorf("%s: attach to %s (TCX, Linux 6.6+): %w", what, where, err)
	}
	return l, nil
}
