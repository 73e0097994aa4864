package splice

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// SYN cookies (RFC 4987 section 3.6): the front-end keeps no state for a
// SYN. Everything it needs when the final ACK arrives is folded into the
// ISN it sends back, and, when the client offered timestamps, into the
// low bits of our TSval, which the client echoes in every segment (as
// Linux does):
//
//	without timestamps            with timestamps
//	ISN bit  31    epoch parity   ISN bit  31    epoch parity
//	ISN bits 30-23 option bits    ISN bits 30-0  MAC (31 bits)
//	ISN bits 22-0  MAC (23 bits)  TSval bits 7-0 option bits
//
// The option bits are the index into cookieMSS of the client's MSS
// (bits 7-5), its window scale + 1, or 0 when it offered none (4-1), and
// SACK-permitted (0). That the client offered timestamps is told by the
// final ACK carrying them, and is part of the MAC.
//
// Keys. Time is cut into epochs of cookieEpoch; each epoch has its own
// key, HMAC-SHA-256(CookieSecret, label || epoch), derived from `now` when
// an epoch begins (sans I/O: no clock, no timer). A cookie verifies only
// with the key of the epoch it was made in, and is accepted in that epoch
// and the next: for 64 to 128 s. The parity bit says which of the two
// keys to try. A cookie replayed later meets keys that never made it, so
// it is no better than a guess however long the wait; there is no slot
// counter to wrap into acceptance (the old 5-bit counter came round every
// 34 minutes).
//
// The MAC is the top 32 bits of SipHash-2-4 (siphash.go) keyed with the
// first 16 bytes of the epoch's key, of three 64-bit words: the two
// addresses; the two ports and the client's ISN; the epoch, the option
// bits and whether the client offered timestamps (cookieMAC). SipHash
// rather than the SHA-256 it replaced because a TC program on the
// front-end's link computes the same MAC to answer SYNs in the kernel
// (splice/link/synanswer.go, fe_linksyn.go): three SipHash compressions
// are a few hundred eBPF instructions, SHA-256 over the 58 bytes it took
// is no work for such a program. And SipHash is made for this: a keyed
// pseudo-random function for short inputs, what Linux computes its own
// SYN cookies with. It is deterministic for a given secret and time
// (tests and replays reproduce) and allocates nothing. For a spoofed
// source, which never sees the SYN-ACK, exactly one value of the keyed
// bits is right: a forger succeeds with probability 2^-23 per guess
// against a client without timestamps (2^-31 with them), 8 million
// guesses on average, against 2^-18 before. Bad final ACKs are answered
// with RSTs at a bounded rate (sendRST), so a guessing flood is not
// reflected one for one.
//
// MSS. The table keeps every client MSS at or below what it said: the
// largest entry not above it is taken, and only an MSS below the smallest
// entry (64, what the MSS clamp elsewhere takes as the floor a segment
// can usefully carry) is raised to it. Without an MSS option the client
// gets 536, the RFC 9293 default.

const (
	cookieEpoch    = Time(64e9) // 64 s, as Linux's cookie slot
	cookieOptBits  = 8
	cookieMACBits  = 32 - 1 - cookieOptBits // without timestamps
	cookieMACBitsT = 32 - 1                 // with timestamps
	cookieOptMask  = 1<<cookieOptBits - 1
)

// cookieMSS lists the MSS values a cookie can name, ascending: a tiny
// floor, 216 and 536 for small links, then the common Internet values and
// jumbo frames.
var cookieMSS = [8]uint16{64, 216, 536, 1220, 1380, 1440, 1460, 8960}

// cookieDefaultMSS is the client's MSS when its SYN has no MSS option.
const cookieDefaultMSS = 536

// cookieKeyLabel separates the key derivation from any other use of the
// secret (the handoff port start is derived from it too).
const cookieKeyLabel = "qsplice syn cookie key v2"

// synInfo is what the client's SYN said, recovered from the cookie.
type synInfo struct {
	mss        uint16
	wscale     int // -1: none
	sack, ts   bool
	clientISN  wire.Seq
	cookieBits uint32 // the option bits
}

type fourTuple struct {
	srcIP, dstIP     wire.IP4
	srcPort, dstPort uint16
}

// compare orders tuples by destination address and port, then source
// (for the shim's reply tuples: the handoff address, then the server's),
// for walks that must not follow a map's order.
func (t fourTuple) compare(u fourTuple) int {
	return cmp.Or(
		bytes.Compare(t.dstIP[:], u.dstIP[:]), cmp.Compare(t.dstPort, u.dstPort),
		bytes.Compare(t.srcIP[:], u.srcIP[:]), cmp.Compare(t.srcPort, u.srcPort))
}

// cookieKeys holds the keys of the current and the previous epoch,
// derived from the secret when the engine's time enters a new epoch.
type cookieKeys struct {
	secret    [32]byte
	epoch     int64 // of cur; -1 before the first use
	cur, prev [32]byte
}

func newCookieKeys(secret [32]byte) cookieKeys {
	return cookieKeys{secret: secret, epoch: -1}
}

// CookieEpoch is how long a cookie key is current. Exported, with
// CookieEpochOf, for the daemon, which gives the link's program each
// epoch's key as the engines enter it (cookie_link.go).
const CookieEpoch = cookieEpoch

// CookieEpochOf is the cookie epoch of engine time now: the number the
// epoch's key is derived from, whose parity a cookie carries.
func CookieEpochOf(now Time) int64 { return int64(now / cookieEpoch) }

// at makes cur the key of now's epoch and prev that of the one before.
func (k *cookieKeys) at(now Time) {
	ep := CookieEpochOf(now)
	switch {
	case ep == k.epoch:
		return
	case ep == k.epoch+1:
		k.prev = k.cur
	default: // the first use, a jump, or time going back (a test)
		k.prev = deriveCookieKey(&k.secret, ep-1)
	}
	k.cur = deriveCookieKey(&k.secret, ep)
	k.epoch = ep
}

// deriveCookieKey is HMAC-SHA-256(secret, label || epoch), RFC 2104 with
// the 32-byte secret zero-padded to SHA-256's 64-byte block, written out
// so that it allocates nothing (crypto/hmac does, each time).
func deriveCookieKey(secret *[32]byte, epoch int64) [32]byte {
	var inner [64 + len(cookieKeyLabel) + 8]byte
	var outer [64 + 32]byte
	for i := range 64 {
		var b byte
		if i < len(secret) {
			b = secret[i]
		}
		inner[i], outer[i] = b^0x36, b^0x5c
	}
	copy(inner[64:], cookieKeyLabel)
	binary.BigEndian.PutUint64(inner[64+len(cookieKeyLabel):], uint64(epoch))
	ih := sha256.Sum256(inner[:])
	copy(outer[64:], ih[:])
	return sha256.Sum256(outer[:])
}

// cookieMAC returns the keyed hash, in its top bits, of what the cookie
// vouches for. The link's program builds the same three words from the
// SYN's header and takes the same key halves (CookieKeyOf): a change here
// is a change there too (splice/link/synanswer_prog.go), or every SYN the
// link answers gets a cookie this engine refuses, which
// TestTheLinksSYNAnswerIsTheEngines and TestCookieKeyIsTheEngines catch.
func cookieMAC(key *[32]byte, ft fourTuple, isn wire.Seq, epoch int64, opts uint32, ts bool) uint32 {
	k0, k1 := binary.LittleEndian.Uint64(key[0:8]), binary.LittleEndian.Uint64(key[8:16])
	w0 := uint64(binary.BigEndian.Uint32(ft.srcIP[:]))<<32 | uint64(binary.BigEndian.Uint32(ft.dstIP[:]))
	w1 := uint64(ft.srcPort)<<48 | uint64(ft.dstPort)<<32 | uint64(uint32(isn))
	w2 := uint64(epoch)<<16 | uint64(opts&0xff)<<8
	if ts {
		w2 |= 1
	}
	return uint32(sipHash24(k0, k1, w0, w1, w2) >> 32)
}

// cookieKeyedBits is how many bits of the ISN are the MAC.
func cookieKeyedBits(ts bool) int {
	if ts {
		return cookieMACBitsT
	}
	return cookieMACBits
}

// cookieMSSIndex picks the largest table entry not above mss (the
// smallest when mss is below them all).
func cookieMSSIndex(mss uint16) uint32 {
	i := 0
	for j, m := range cookieMSS {
		if m <= mss {
			i = j
		}
	}
	return uint32(i)
}

// cookieOptions encodes what the client's SYN offered into option bits.
func cookieOptions(o *wire.TCPOptions) uint32 {
	mss := uint16(cookieDefaultMSS)
	if o.HasMSS {
		mss = o.MSS
	}
	bits := cookieMSSIndex(mss) << 5
	if o.HasWScale {
		bits |= uint32(min(o.WScale, wire.MaxWScale)+1) << 1
	}
	if o.SACKPermitted {
		bits |= 1
	}
	return bits
}

// make returns our ISN for a SYN from ft with client ISN isn and options
// o, and, when o has timestamps, the TSval for the SYN-ACK: our clock
// with the option bits in its low bits, moved back rather than forward
// (by less than 2^cookieOptBits ms) so that the TSvals that follow never
// go backwards.
func (k *cookieKeys) make(now Time, ft fourTuple, isn wire.Seq, o *wire.TCPOptions) (wire.Seq, uint32) {
	k.at(now)
	opts := cookieOptions(o)
	parity := uint32(k.epoch&1) << 31
	mac := cookieMAC(&k.cur, ft, isn, k.epoch, opts, o.HasTS)
	if !o.HasTS {
		return wire.Seq(parity | opts<<cookieMACBits | mac>>(32-cookieMACBits)), 0
	}
	clock := tsClock(now)
	tsval := clock&^cookieOptMask | opts
	if clock&cookieOptMask < opts {
		tsval -= 1 << cookieOptBits
	}
	return wire.Seq(parity | mac>>(32-cookieMACBitsT)), tsval
}

// check validates the ACK number of a handshake's final ACK (with the
// timestamp echo tsEcr when it carries timestamps) and recovers what the
// SYN said.
func (k *cookieKeys) check(now Time, ft fourTuple, ack, seq wire.Seq, ts bool, tsEcr uint32) (synInfo, bool) {
	k.at(now)
	cookie := uint32(ack - 1)
	isn := seq - 1
	epoch, key := k.epoch, &k.cur
	if uint32(epoch&1) != cookie>>31 {
		epoch, key = k.epoch-1, &k.prev
		if epoch < 0 {
			return synInfo{}, false
		}
	}
	var opts, mac uint32
	if ts {
		opts, mac = tsEcr&cookieOptMask, cookie<<1>>1
	} else {
		opts, mac = cookie>>cookieMACBits&cookieOptMask, cookie&(1<<cookieMACBits-1)
	}
	if cookieMAC(key, ft, isn, epoch, opts, ts)>>(32-cookieKeyedBits(ts)) != mac {
		return synInfo{}, false
	}
	return synInfo{
		mss:        cookieMSS[opts>>5],
		wscale:     int(opts>>1&0xf) - 1,
		sack:       opts&1 != 0,
		ts:         ts,
		clientISN:  isn,
		cookieBits: opts,
	}, true
}
