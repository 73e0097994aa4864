package link

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// The SYN answer's TC program (synanswer.go says what it does and why).
// Registers: R6 the skb, R7 the frame's first byte, R8 its end, R9 the
// length of the SYN's options (equal to the SYN-ACK's). The SYN-ACK is
// built on the stack while the SYN can still be read directly, then
// written over it with bpf_skb_store_bytes.

// Frame offsets beyond those of the reply fast path (replyfast.go).
const (
	saIPTTL  = fpIP + 8
	saSrcMAC = 6
	saDPort  = fpTCP + 2
	saMaxLen = fpOptions + 20 // the longest SYN answered: 20 option bytes
	saMinLen = fpOptions + 4  // the shortest: MSS alone
)

// Stack slots (offsets from R10).
const (
	saKey   = -8  // map keys, then the TCP checksum's difference
	saSeen  = -16 // options seen: bit 0 MSS, 1 window scale, 2 timestamps
	saMSS   = -24 // the client's MSS (host order), or the default
	saWS1   = -32 // its window scale + 1, or 0: none
	saSACK  = -40 // SACK-permitted: 1
	saTSVal = -48 // its TSval as on the wire
	saOpts  = -56 // the cookie's option bits
	saEpoch = -64
	saK0    = -72
	saK1    = -80
	saBase  = -88  // clock base, ns
	saTSv   = -96  // our TSval, network order
	saISN   = -104 // our ISN, network order
	saOld   = -144 // the SYN's TCP header, 40 bytes
	saNew   = -184 // the SYN-ACK's, 40 bytes
	saIPHdr = -208 // the SYN-ACK's IP header, 20 bytes
	saEth   = -224 // its Ethernet addresses, 12 bytes
)

const (
	seenMSS = 1
	seenWS  = 2
	seenTS  = 4
)

// nativeWord is the value a native 4-byte load of b gives.
func nativeWord(b0, b1, b2, b3 byte) int64 {
	return int64(int32(binary.NativeEndian.Uint32([]byte{b0, b1, b2, b3})))
}

// rotl64 rotates r left by n bits, using tmp.
func rotl64(r, tmp asm.Register, n int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(tmp, r),
		asm.LSh.Imm(r, n),
		asm.RSh.Imm(tmp, 64-n),
		asm.Or.Reg(r, tmp),
	}
}

// sipRound is SipHash's round on v0..v3 = R1..R4, with R5 as scratch.
func sipRound() asm.Instructions {
	v0, v1, v2, v3, t := asm.R1, asm.R2, asm.R3, asm.R4, asm.R5
	var in asm.Instructions
	in = append(in, asm.Add.Reg(v0, v1))
	in = append(in, rotl64(v1, t, 13)...)
	in = append(in, asm.Xor.Reg(v1, v0))
	in = append(in, rotl64(v0, t, 32)...)
	in = append(in, asm.Add.Reg(v2, v3))
	in = append(in, rotl64(v3, t, 16)...)
	in = append(in, asm.Xor.Reg(v3, v2))
	in = append(in, asm.Add.Reg(v0, v3))
	in = append(in, rotl64(v3, t, 21)...)
	in = append(in, asm.Xor.Reg(v3, v0))
	in = append(in, asm.Add.Reg(v2, v1))
	in = append(in, rotl64(v1, t, 17)...)
	in = append(in, asm.Xor.Reg(v1, v2))
	in = append(in, rotl64(v2, t, 32)...)
	return in
}

// sipCompress mixes the message word in R0 into the state: SipHash-2-4's
// two compression rounds.
func sipCompress() asm.Instructions {
	in := asm.Instructions{asm.Xor.Reg(asm.R4, asm.R0)}
	in = append(in, sipRound()...)
	in = append(in, sipRound()...)
	return append(in, asm.Xor.Reg(asm.R1, asm.R0))
}

// foldSum folds the 32-bit one's-complement sum in R0 to 16 bits, using R1.
func foldSum() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg32(asm.R0, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.RSh.Imm(asm.R1, 16),
		asm.And.Imm(asm.R0, 0xffff),
		asm.Add.Reg(asm.R0, asm.R1),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.RSh.Imm(asm.R1, 16),
		asm.And.Imm(asm.R0, 0xffff),
		asm.Add.Reg(asm.R0, asm.R1),
	}
}

// stackPtr points r at the stack slot off.
func stackPtr(r asm.Register, off int16) asm.Instructions {
	return asm.Instructions{asm.Mov.Reg(r, asm.RFP), asm.Add.Imm(r, int32(off))}
}

// synAnswerOptions writes the SYN-ACK's options for one combination of
// what the client offered (timestamps, SACK-permitted, window scale) at
// saNew+20, as wire.SynOptions.Encode lays them out.
func synAnswerOptions(cfg SYNAnswerConfig, ts, sack, ws bool) asm.Instructions {
	off := int16(saNew + 20)
	in := asm.Instructions{
		asm.StoreImm(asm.RFP, off, nativeWord(2, 4, byte(cfg.MSS>>8), byte(cfg.MSS)), asm.Word),
	}
	off += 4
	switch {
	case ts:
		k0, k1 := byte(1), byte(1)
		if sack {
			k0, k1 = 4, 2
		}
		in = append(in,
			asm.StoreImm(asm.RFP, off, nativeWord(k0, k1, 8, 10), asm.Word),
			asm.LoadMem(asm.R0, asm.RFP, saTSv, asm.Word),
			asm.StoreMem(asm.RFP, off+4, asm.R0, asm.Word),
			asm.LoadMem(asm.R0, asm.RFP, saTSVal, asm.Word),
			asm.StoreMem(asm.RFP, off+8, asm.R0, asm.Word),
		)
		off += 12
	case sack:
		in = append(in, asm.StoreImm(asm.RFP, off, nativeWord(1, 1, 4, 2), asm.Word))
		off += 4
	}
	if ws {
		in = append(in, asm.StoreImm(asm.RFP, off, nativeWord(1, 3, 3, cfg.WScale), asm.Word))
	}
	return append(in, asm.Ja.Label("built"))
}

// synAnswerLayout matches the SYN's options against layout c (bit 2:
// timestamps, 1: SACK-permitted, 0: window scale), the one Linux sends
// and the SYN-ACK has (wire.SynOptions.Encode): MSS; then NOP NOP (or
// SACK-permitted) and timestamps, or NOP NOP SACK-permitted; then NOP
// and window scale. A match records what the SYN offered and goes on
// at "optend"; a mismatch tries the next layout, or after the last one
// leaves the SYN to the engine. R9 is the options' length.
func synAnswerLayout(c int, last bool) asm.Instructions {
	ts, sack, ws := c&4 != 0, c&2 != 0, c&1 != 0
	next := fmt.Sprintf("layout%d", c+1)
	if last {
		next = "pass"
	}
	n := 4
	switch {
	case ts:
		n += 12
	case sack:
		n += 4
	}
	wsAt := fpOptions + n
	if ws {
		n += 4
	}
	in := asm.Instructions{
		asm.JNE.Imm(asm.R9, int32(n), next).WithSymbol(fmt.Sprintf("layout%d", c)),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, int32(fpOptions+n)),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpOptions, asm.Half),
		asm.JNE.Imm(asm.R0, be16(0x0204), next),
	}
	switch {
	case ts:
		first := uint16(0x0101)
		if sack {
			first = 0x0402
		}
		in = append(in,
			asm.LoadMem(asm.R0, asm.R7, fpOptions+4, asm.Word),
			asm.JNE.Imm32(asm.R0, int32(nativeWord(byte(first>>8), byte(first), 8, 10)), next),
		)
	case sack:
		in = append(in,
			asm.LoadMem(asm.R0, asm.R7, fpOptions+4, asm.Word),
			asm.JNE.Imm32(asm.R0, int32(nativeWord(1, 1, 4, 2)), next),
		)
	}
	if ws {
		in = append(in,
			asm.LoadMem(asm.R0, asm.R7, int16(wsAt), asm.Half),
			asm.JNE.Imm(asm.R0, be16(0x0103), next),
			asm.LoadMem(asm.R0, asm.R7, int16(wsAt+2), asm.Byte),
			asm.JNE.Imm(asm.R0, 3, next),
		)
	}
	// A match: MSS, and what else was offered.
	in = append(in,
		asm.LoadMem(asm.R0, asm.R7, fpOptions+2, asm.Half),
		asm.HostTo(asm.BE, asm.R0, asm.Half),
		asm.StoreMem(asm.RFP, saMSS, asm.R0, asm.DWord),
	)
	if ts {
		in = append(in,
			asm.Mov.Imm(asm.R0, seenTS),
			asm.StoreMem(asm.RFP, saSeen, asm.R0, asm.DWord),
			asm.LoadMem(asm.R0, asm.R7, fpOptions+8, asm.Word),
			asm.StoreMem(asm.RFP, saTSVal, asm.R0, asm.Word),
		)
	}
	if sack {
		in = append(in,
			asm.Mov.Imm(asm.R0, 1),
			asm.StoreMem(asm.RFP, saSACK, asm.R0, asm.DWord),
		)
	}
	if ws {
		clamp := fmt.Sprintf("wsok%d", c)
		in = append(in,
			asm.LoadMem(asm.R0, asm.R7, int16(wsAt+3), asm.Byte),
			asm.JLE.Imm(asm.R0, 14, clamp), // wire.MaxWScale
			asm.Mov.Imm(asm.R0, 14),
			asm.Add.Imm(asm.R0, 1).WithSymbol(clamp),
			asm.StoreMem(asm.RFP, saWS1, asm.R0, asm.DWord),
		)
	}
	return append(in, asm.Ja.Label("optend"))
}

// synAnswerProgram is the TC program.
func synAnswerProgram(cfg SYNAnswerConfig, listen, keys, stats int) asm.Instructions {
	const (
		skbLen = 0
		sipC0  = 0x736f6d6570736575
		sipC1  = 0x646f72616e646f6d
		sipC2  = 0x6c7967656e657261
		sipC3  = 0x7465646279746573
	)
	in := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// Only frames as long as an answerable SYN, with the headers
		// linear.
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.JGT.Imm(asm.R2, saMaxLen, "pass"),
		asm.JLT.Imm(asm.R2, saMinLen, "pass"),
		asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.Add.Imm(asm.R3, fpOptions),
		asm.JLE.Reg(asm.R3, asm.R8, "linear"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnSkbPullData.Call(),
		asm.JNE.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
		// The ingress checks, a listening destination, SYN alone.
		asm.Mov.Reg(asm.R2, asm.R7).WithSymbol("linear"),
		asm.Add.Imm(asm.R2, fpOptions),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
	}
	in = append(in, wireSYNChecks("pass")...)
	in = append(in,
		asm.LoadMem(asm.R0, asm.R7, saDPort, asm.Half),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		// Lengths: the frame ends where IPv4 says, the TCP header where
		// the IPv4 payload does, and the options fit the longest answer.
		asm.LoadMem(asm.R9, asm.R7, fpIPLen, asm.Half),
		asm.HostTo(asm.BE, asm.R9, asm.Half),
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.Mov.Reg(asm.R3, asm.R9),
		asm.Add.Imm(asm.R3, fpIP),
		asm.JNE.Reg(asm.R3, asm.R2, "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpDataOff, asm.Byte),
		asm.RSh.Imm(asm.R0, 4),
		asm.LSh.Imm(asm.R0, 2),
		asm.Sub.Imm(asm.R9, 20),
		asm.JNE.Reg(asm.R0, asm.R9, "pass"),
		asm.Sub.Imm(asm.R9, 20),
		asm.JGT.Imm(asm.R9, 20, "pass"), // also a header shorter than 20: R9 wrapped
		// The IP header's checksum.
		asm.Mov.Imm(asm.R1, 0),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.Add.Imm(asm.R3, fpIP),
		asm.Mov.Imm(asm.R4, 20),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnCsumDiff.Call(),
	)
	in = append(in, foldSum()...)
	in = append(in,
		asm.JNE.Imm(asm.R0, 0xffff, "pass"),
		// A destination that listens, a source not our own.
		asm.LoadMem(asm.R0, asm.R7, fpIPDst, asm.Word),
		asm.StoreMem(asm.RFP, saKey, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R7, saDPort, asm.Half),
		asm.StoreMem(asm.RFP, saKey+4, asm.R0, asm.Half),
		asm.StoreImm(asm.RFP, saKey+6, 0, asm.Half),
		asm.LoadMapPtr(asm.R1, listen),
	)
	in = append(in, stackPtr(asm.R2, saKey)...)
	in = append(in,
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R0, asm.R7, fpIPSrc, asm.Word),
		asm.StoreMem(asm.RFP, saKey, asm.R0, asm.Word),
		asm.StoreImm(asm.RFP, saKey+4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, listen),
	)
	in = append(in, stackPtr(asm.R2, saKey)...)
	in = append(in,
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "pass"),
		// The options: the whole frame linear first (bpf_skb_pull_data,
		// which only checks when it already is), for reads at constant
		// offsets (pointer arithmetic with a variable needs CAP_PERFMON).
		asm.Mov.Imm(asm.R0, 0),
		asm.StoreMem(asm.RFP, saSeen, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, saWS1, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, saSACK, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, saTSVal, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.FnSkbPullData.Call(),
		asm.JNE.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
	)
	for c := range 8 {
		in = append(in, synAnswerLayout(c, c == 7)...)
	}
	in = append(in,
		// The SYN-ACK's options must be as long as the SYN's.
		asm.LoadMem(asm.R0, asm.RFP, saSeen, asm.DWord).WithSymbol("optend"),
		asm.Mov.Imm(asm.R2, 4),
		asm.JSet.Imm(asm.R0, seenTS, "lents"),
		asm.LoadMem(asm.R3, asm.RFP, saSACK, asm.DWord),
		asm.JEq.Imm(asm.R3, 0, "lenws"),
		asm.Add.Imm(asm.R2, 4),
		asm.Ja.Label("lenws"),
		asm.Add.Imm(asm.R2, 12).WithSymbol("lents"),
		asm.LoadMem(asm.R3, asm.RFP, saWS1, asm.DWord).WithSymbol("lenws"),
		asm.JEq.Imm(asm.R3, 0, "lencmp"),
		asm.Add.Imm(asm.R2, 4),
		asm.JNE.Reg(asm.R2, asm.R9, "pass").WithSymbol("lencmp"),
		// The cookie's option bits: MSS index << 5 | wscale+1 << 1 | SACK.
		asm.LoadMem(asm.R0, asm.RFP, saMSS, asm.DWord),
		asm.Mov.Imm(asm.R2, 0),
	)
	for j := 1; j < len(cfg.MSSTable); j++ {
		in = append(in,
			asm.JLT.Imm(asm.R0, int32(cfg.MSSTable[j]), "mssidx"),
			asm.Mov.Imm(asm.R2, int32(j)),
		)
	}
	in = append(in,
		asm.LSh.Imm(asm.R2, 5).WithSymbol("mssidx"),
		asm.LoadMem(asm.R3, asm.RFP, saWS1, asm.DWord),
		asm.LSh.Imm(asm.R3, 1),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.LoadMem(asm.R3, asm.RFP, saSACK, asm.DWord),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.StoreMem(asm.RFP, saOpts, asm.R2, asm.DWord),
		// The key: the current epoch, then its slot.
		asm.StoreImm(asm.RFP, saKey, answerSlotCur, asm.Word),
		asm.LoadMapPtr(asm.R1, keys),
	)
	in = append(in, stackPtr(asm.R2, saKey)...)
	in = append(in,
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.LoadMem(asm.R2, asm.R0, 8, asm.DWord),
		asm.StoreMem(asm.RFP, saBase, asm.R2, asm.DWord),
		asm.And.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, saKey, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, keys),
	)
	in = append(in, stackPtr(asm.R2, saKey)...)
	in = append(in,
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.StoreMem(asm.RFP, saEpoch, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.StoreMem(asm.RFP, saK0, asm.R1, asm.DWord),
		asm.LoadMem(asm.R2, asm.R0, 16, asm.DWord),
		asm.StoreMem(asm.RFP, saK1, asm.R2, asm.DWord),
		asm.Or.Reg(asm.R1, asm.R2),
		asm.JEq.Imm(asm.R1, 0, "pass"), // no key yet
		// Our TSval: the engine's millisecond clock with the option bits
		// in its low byte, moved back (cookie.go, make).
		asm.LoadMem(asm.R0, asm.RFP, saSeen, asm.DWord),
		asm.JSet.Imm(asm.R0, seenTS, "clock"),
		asm.Ja.Label("sip"),
		asm.FnKtimeGetNs.Call().WithSymbol("clock"),
		asm.LoadMem(asm.R1, asm.RFP, saBase, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R1),
		asm.Div.Imm(asm.R0, 1000000),
		asm.Mov.Reg32(asm.R0, asm.R0),
		asm.LoadMem(asm.R1, asm.RFP, saOpts, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R0),
		asm.And.Imm(asm.R2, 0xff),
		asm.And.Imm(asm.R0, -256),
		asm.Or.Reg(asm.R0, asm.R1),
		asm.JGE.Reg(asm.R2, asm.R1, "tsok"),
		asm.Sub.Imm(asm.R0, 256),
		asm.HostTo(asm.BE, asm.R0, asm.Word).WithSymbol("tsok"),
		asm.StoreMem(asm.RFP, saTSv, asm.R0, asm.Word),
		// The MAC: SipHash-2-4 of three words (cookie.go, cookieMAC).
		asm.LoadImm(asm.R5, sipC0, asm.DWord).WithSymbol("sip"),
		asm.LoadMem(asm.R1, asm.RFP, saK0, asm.DWord),
		asm.Xor.Reg(asm.R1, asm.R5),
		asm.LoadImm(asm.R5, sipC1, asm.DWord),
		asm.LoadMem(asm.R2, asm.RFP, saK1, asm.DWord),
		asm.Xor.Reg(asm.R2, asm.R5),
		asm.LoadImm(asm.R5, sipC2, asm.DWord),
		asm.LoadMem(asm.R3, asm.RFP, saK0, asm.DWord),
		asm.Xor.Reg(asm.R3, asm.R5),
		asm.LoadImm(asm.R5, sipC3, asm.DWord),
		asm.LoadMem(asm.R4, asm.RFP, saK1, asm.DWord),
		asm.Xor.Reg(asm.R4, asm.R5),
		// w0: source and destination address
		asm.LoadMem(asm.R0, asm.R7, fpIPSrc, asm.Word),
		asm.HostTo(asm.BE, asm.R0, asm.Word),
		asm.LSh.Imm(asm.R0, 32),
		asm.LoadMem(asm.R5, asm.R7, fpIPDst, asm.Word),
		asm.HostTo(asm.BE, asm.R5, asm.Word),
		asm.Or.Reg(asm.R0, asm.R5),
	)
	in = append(in, sipCompress()...)
	in = append(in,
		// w1: ports and the client's ISN
		asm.LoadMem(asm.R0, asm.R7, fpPorts, asm.Half),
		asm.HostTo(asm.BE, asm.R0, asm.Half),
		asm.LSh.Imm(asm.R0, 48),
		asm.LoadMem(asm.R5, asm.R7, saDPort, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.LSh.Imm(asm.R5, 32),
		asm.Or.Reg(asm.R0, asm.R5),
		asm.LoadMem(asm.R5, asm.R7, fpSeq, asm.Word),
		asm.HostTo(asm.BE, asm.R5, asm.Word),
		asm.Or.Reg(asm.R0, asm.R5),
	)
	in = append(in, sipCompress()...)
	in = append(in,
		// w2: epoch, option bits, timestamps
		asm.LoadMem(asm.R0, asm.RFP, saEpoch, asm.DWord),
		asm.LSh.Imm(asm.R0, 16),
		asm.LoadMem(asm.R5, asm.RFP, saOpts, asm.DWord),
		asm.LSh.Imm(asm.R5, 8),
		asm.Or.Reg(asm.R0, asm.R5),
		asm.LoadMem(asm.R5, asm.RFP, saSeen, asm.DWord),
		asm.RSh.Imm(asm.R5, 2),
		asm.And.Imm(asm.R5, 1),
		asm.Or.Reg(asm.R0, asm.R5),
	)
	in = append(in, sipCompress()...)
	in = append(in, asm.LoadImm(asm.R0, 24<<56, asm.DWord))
	in = append(in, sipCompress()...)
	in = append(in, asm.Xor.Imm(asm.R3, 0xff))
	for range 4 {
		in = append(in, sipRound()...)
	}
	in = append(in,
		asm.Xor.Reg(asm.R1, asm.R2),
		asm.Xor.Reg(asm.R1, asm.R3),
		asm.Xor.Reg(asm.R1, asm.R4),
		asm.RSh.Imm(asm.R1, 32), // the MAC
		// The ISN: epoch parity, then the MAC (with timestamps), or the
		// option bits and the MAC's top 23 bits.
		asm.LoadMem(asm.R2, asm.RFP, saEpoch, asm.DWord),
		asm.And.Imm(asm.R2, 1),
		asm.LSh.Imm(asm.R2, 31),
		asm.LoadMem(asm.R0, asm.RFP, saSeen, asm.DWord),
		asm.JSet.Imm(asm.R0, seenTS, "isnts"),
		asm.LoadMem(asm.R3, asm.RFP, saOpts, asm.DWord),
		asm.LSh.Imm(asm.R3, 23),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.RSh.Imm(asm.R1, 9),
		asm.Or.Reg(asm.R2, asm.R1),
		asm.Ja.Label("isn"),
		asm.RSh.Imm(asm.R1, 1).WithSymbol("isnts"),
		asm.Or.Reg(asm.R2, asm.R1),
		asm.HostTo(asm.BE, asm.R2, asm.Word).WithSymbol("isn"),
		asm.StoreMem(asm.RFP, saISN, asm.R2, asm.Word),
		// Ethernet: back to the sender, from us.
		asm.LoadMem(asm.R0, asm.R7, saSrcMAC, asm.Word),
		asm.StoreMem(asm.RFP, saEth, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R7, saSrcMAC+4, asm.Half),
		asm.StoreMem(asm.RFP, saEth+4, asm.R0, asm.Half),
		asm.StoreImm(asm.RFP, saEth+6, int64(be16(uint16(cfg.MAC[0])<<8|uint16(cfg.MAC[1]))), asm.Half),
		asm.StoreImm(asm.RFP, saEth+8, int64(be16(uint16(cfg.MAC[2])<<8|uint16(cfg.MAC[3]))), asm.Half),
		asm.StoreImm(asm.RFP, saEth+10, int64(be16(uint16(cfg.MAC[4])<<8|uint16(cfg.MAC[5]))), asm.Half),
		// IPv4 as wire's encodeIPv4Headers writes it: no TOS, ID 0, DF,
		// TTL 64, the addresses swapped.
		asm.LoadMem(asm.R0, asm.R7, fpIPLen, asm.Half),
		asm.StoreImm(asm.RFP, saIPHdr, nativeWord(0x45, 0, 0, 0), asm.Word),
		asm.StoreMem(asm.RFP, saIPHdr+2, asm.R0, asm.Half),
		asm.StoreImm(asm.RFP, saIPHdr+4, nativeWord(0, 0, 0x40, 0), asm.Word),
		asm.StoreImm(asm.RFP, saIPHdr+8, nativeWord(64, 6, 0, 0), asm.Word),
		asm.LoadMem(asm.R0, asm.R7, fpIPDst, asm.Word),
		asm.StoreMem(asm.RFP, saIPHdr+12, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R7, fpIPSrc, asm.Word),
		asm.StoreMem(asm.RFP, saIPHdr+16, asm.R0, asm.Word),
		asm.Mov.Imm(asm.R1, 0),
		asm.Mov.Imm(asm.R2, 0),
	)
	in = append(in, stackPtr(asm.R3, saIPHdr)...)
	in = append(in,
		asm.Mov.Imm(asm.R4, 20),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnCsumDiff.Call(),
	)
	in = append(in, foldSum()...)
	in = append(in,
		asm.Xor.Imm(asm.R0, 0xffff),
		asm.StoreMem(asm.RFP, saIPHdr+10, asm.R0, asm.Half),
	)
	// The TCP headers: the SYN's as it is, the SYN-ACK's with the SYN's
	// checksum in place so that their difference leaves it out.
	in = append(in, asm.Mov.Imm(asm.R0, 0))
	for off := int16(0); off < 40; off += 8 {
		in = append(in,
			asm.StoreMem(asm.RFP, saOld+off, asm.R0, asm.DWord),
			asm.StoreMem(asm.RFP, saNew+off, asm.R0, asm.DWord),
		)
	}
	in = append(in,
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, fpTCP),
	)
	in = append(in, stackPtr(asm.R3, saOld)...)
	in = append(in,
		asm.Mov.Reg(asm.R4, asm.R9),
		asm.Add.Imm(asm.R4, 20),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R0, asm.R7, saDPort, asm.Half),
		asm.StoreMem(asm.RFP, saNew, asm.R0, asm.Half),
		asm.LoadMem(asm.R0, asm.R7, fpPorts, asm.Half),
		asm.StoreMem(asm.RFP, saNew+2, asm.R0, asm.Half),
		asm.LoadMem(asm.R0, asm.RFP, saISN, asm.Word),
		asm.StoreMem(asm.RFP, saNew+4, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R7, fpSeq, asm.Word),
		asm.HostTo(asm.BE, asm.R0, asm.Word),
		asm.Add.Imm(asm.R0, 1),
		asm.HostTo(asm.BE, asm.R0, asm.Word),
		asm.StoreMem(asm.RFP, saNew+8, asm.R0, asm.Word),
		asm.Mov.Reg(asm.R0, asm.R9),
		asm.Add.Imm(asm.R0, 20),
		asm.LSh.Imm(asm.R0, 2), // (len/4) << 4
		asm.StoreMem(asm.RFP, saNew+12, asm.R0, asm.Byte),
		asm.StoreImm(asm.RFP, saNew+13, 0x12, asm.Byte), // SYN, ACK
		asm.StoreImm(asm.RFP, saNew+14, int64(be16(cfg.Window)), asm.Half),
		asm.LoadMem(asm.R0, asm.R7, fpTCPCsum, asm.Half),
		asm.StoreMem(asm.RFP, saNew+16, asm.R0, asm.Half),
		// The options: one block per combination of what was offered.
		asm.LoadMem(asm.R0, asm.RFP, saSeen, asm.DWord),
		asm.RSh.Imm(asm.R0, 2),
		asm.And.Imm(asm.R0, 1),
		asm.LSh.Imm(asm.R0, 2),
		asm.LoadMem(asm.R1, asm.RFP, saSACK, asm.DWord),
		asm.LSh.Imm(asm.R1, 1),
		asm.Or.Reg(asm.R0, asm.R1),
		asm.LoadMem(asm.R1, asm.RFP, saWS1, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "optsel"),
		asm.Or.Imm(asm.R0, 1),
	)
	for c := range 8 {
		jmp := asm.JEq.Imm(asm.R0, int32(c), fmt.Sprintf("opts%d", c))
		if c == 0 {
			jmp = jmp.WithSymbol("optsel")
		}
		in = append(in, jmp)
	}
	in = append(in, asm.Ja.Label("pass"))
	for c := range 8 {
		blk := synAnswerOptions(cfg, c&4 != 0, c&2 != 0, c&1 != 0)
		blk[0] = blk[0].WithSymbol(fmt.Sprintf("opts%d", c))
		in = append(in, blk...)
	}
	// The TCP checksum's difference; then the writes.
	sp := stackPtr(asm.R1, saOld)
	sp[0] = sp[0].WithSymbol("built")
	in = append(in, sp...)
	in = append(in,
		asm.Mov.Reg(asm.R2, asm.R9),
		asm.Add.Imm(asm.R2, 20),
	)
	in = append(in, stackPtr(asm.R3, saNew)...)
	in = append(in,
		asm.Mov.Reg(asm.R4, asm.R9),
		asm.Add.Imm(asm.R4, 20),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnCsumDiff.Call(),
		asm.StoreMem(asm.RFP, saKey, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, fpTCP),
	)
	in = append(in, stackPtr(asm.R3, saNew)...)
	in = append(in,
		asm.Mov.Reg(asm.R4, asm.R9),
		asm.Add.Imm(asm.R4, 20),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "shot"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, fpIP),
	)
	in = append(in, stackPtr(asm.R3, saIPHdr)...)
	in = append(in,
		asm.Mov.Imm(asm.R4, 20),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "shot"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
	)
	in = append(in, stackPtr(asm.R3, saEth)...)
	in = append(in,
		asm.Mov.Imm(asm.R4, 12),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "shot"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, fpTCPCsum),
		asm.Mov.Imm(asm.R3, 0),
		asm.LoadMem(asm.R4, asm.RFP, saKey, asm.DWord),
		asm.Mov.Imm(asm.R5, 0), // a difference, not a field of a size
		asm.FnL4CsumReplace.Call(),
		asm.JNE.Imm(asm.R0, 0, "shot"),
		// Count it and send it back out.
		asm.StoreImm(asm.RFP, saKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, stats),
	)
	in = append(in, stackPtr(asm.R2, saKey)...)
	in = append(in,
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "redirect"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, int32(cfg.Ifindex)).WithSymbol("redirect"),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
		// Half written: the frame is neither the SYN nor its answer.
		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("shot"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcActOK).WithSymbol("pass"),
		asm.Return(),
	)
	return in
}
