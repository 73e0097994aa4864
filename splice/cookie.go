package splice

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// SYN cookies (RFC 4987 section 3.6): the front-end keeps no state for a
// SYN. Everything it needs when the final ACK arrives is folded into the
// ISN it sends back:
//
//	bits 31-27  time slot (cookieSlot of engine time, mod 32)
//	bits 26-24  index into cookieMSS of the client's MSS (rounded down)
//	bits 23-20  client's window scale + 1, or 0 when it offered none
//	bit  19     client offered SACK
//	bit  18     client offered timestamps
//	bits 17-0   keyed hash of the 4-tuple, client ISN, slot and bits 26-18
//
// The hash is SHA-256 over secret and fields on the stack, so cookies are
// deterministic for a given secret (replays reproduce) and allocation-free.
// A cookie is accepted for cookieSlotsValid slots after it was issued.

const (
	cookieSlot       = Time(64e9) // 64 s per slot, as Linux
	cookieSlotsValid = 2
	cookieHashBits   = 18
)

// cookieMSS lists the MSS values a cookie can name; the client's MSS is
// rounded down to one of them (we may under-use its MSS, never exceed it).
var cookieMSS = [8]uint16{536, 1200, 1220, 1380, 1400, 1440, 1452, 1460}

// synInfo is what the client's SYN said, recovered from the cookie.
type synInfo struct {
	mss        uint16
	wscale     int // -1: none
	sack, ts   bool
	clientISN  wire.Seq
	cookieBits uint32
}

type fourTuple struct {
	srcIP, dstIP     wire.IP4
	srcPort, dstPort uint16
}

func cookieHash(secret *[32]byte, ft fourTuple, isn wire.Seq, slot uint32, bits uint32) uint32 {
	var b [32 + 12 + 4 + 4 + 4]byte
	copy(b[:32], secret[:])
	copy(b[32:36], ft.srcIP[:])
	copy(b[36:40], ft.dstIP[:])
	binary.BigEndian.PutUint16(b[40:], ft.srcPort)
	binary.BigEndian.PutUint16(b[42:], ft.dstPort)
	binary.BigEndian.PutUint32(b[44:], uint32(isn))
	binary.BigEndian.PutUint32(b[48:], slot)
	binary.BigEndian.PutUint32(b[52:], bits)
	sum := sha256.Sum256(b[:])
	return binary.BigEndian.Uint32(sum[:]) & (1<<cookieHashBits - 1)
}

// makeCookie returns our ISN for a SYN from ft with client ISN isn.
func makeCookie(secret *[32]byte, now Time, ft fourTuple, isn wire.Seq, o *wire.TCPOptions) wire.Seq {
	slot := uint32(now/cookieSlot) & 0x1f
	mssIdx := 0
	mss := uint16(536)
	if o.HasMSS {
		mss = o.MSS
	}
	for i, m := range cookieMSS {
		if m <= mss {
			mssIdx = i
		}
	}
	var bits uint32 = uint32(mssIdx) << 24
	if o.HasWScale {
		bits |= uint32(o.WScale+1) << 20
	}
	if o.SACKPermitted {
		bits |= 1 << 19
	}
	if o.HasTS {
		bits |= 1 << 18
	}
	h := cookieHash(secret, ft, isn, slot, bits)
	return wire.Seq(slot<<27 | bits | h)
}

// checkCookie validates the ACK number of a handshake's final ACK and
// recovers what the SYN said.
func checkCookie(secret *[32]byte, now Time, ft fourTuple, ack, seq wire.Seq) (synInfo, bool) {
	cookie := uint32(ack - 1)
	isn := seq - 1
	slot := cookie >> 27
	bits := cookie & (0x1ff << 18)
	nowSlot := uint32(now/cookieSlot) & 0x1f
	age := (nowSlot - slot) & 0x1f
	if age >= cookieSlotsValid {
		return synInfo{}, false
	}
	if cookieHash(secret, ft, isn, slot, bits) != cookie&(1<<cookieHashBits-1) {
		return synInfo{}, false
	}
	info := synInfo{
		mss:        cookieMSS[(bits>>24)&7],
		wscale:     int((bits>>20)&0xf) - 1,
		sack:       bits&(1<<19) != 0,
		ts:         bits&(1<<18) != 0,
		clientISN:  isn,
		cookieBits: bits,
	}
	if info.wscale > wire.MaxWScale {
		return synInfo{}, false
	}
	return info, true
}
