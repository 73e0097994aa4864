package splice

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// sipHashBytes is SipHash-2-4 of any message, byte by byte as the
// reference implementation reads it: the check on sipHash24's words.
func sipHashBytes(key [16]byte, msg []byte) uint64 {
	k0, k1 := binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])
	v := [4]uint64{k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573}
	round := func() {
		v[0] += v[1]
		v[1] = bits.RotateLeft64(v[1], 13) ^ v[0]
		v[0] = bits.RotateLeft64(v[0], 32)
		v[2] += v[3]
		v[3] = bits.RotateLeft64(v[3], 16) ^ v[2]
		v[0] += v[3]
		v[3] = bits.RotateLeft64(v[3], 21) ^ v[0]
		v[2] += v[1]
		v[1] = bits.RotateLeft64(v[1], 17) ^ v[2]
		v[2] = bits.RotateLeft64(v[2], 32)
	}
	compress := func(m uint64) { v[3] ^= m; round(); round(); v[0] ^= m }
	n := len(msg)
	for ; len(msg) >= 8; msg = msg[8:] {
		compress(binary.LittleEndian.Uint64(msg))
	}
	var last [8]byte
	copy(last[:], msg)
	last[7] = byte(n)
	compress(binary.LittleEndian.Uint64(last[:]))
	v[2] ^= 0xff
	round()
	round()
	round()
	round()
	return v[0] ^ v[1] ^ v[2] ^ v[3]
}

// TestSipHashMatchesTheReference checks the byte-wise SipHash against
// the paper's vectors (key 00..0f; messages 00..0e, appendix A, and the
// empty one, vectors_sip64[0] of the reference implementation), then
// sipHash24 against it on the 24-byte message 00..17 and on random keys
// and words.
func TestSipHashMatchesTheReference(t *testing.T) {
	var key [16]byte
	for i := range key {
		key[i] = byte(i)
	}
	msg := make([]byte, 24)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, c := range []struct {
		n    int
		want uint64
	}{{15, 0xa129ca6149be45e5}, {0, 0x726fdb47dd0e0e31}} {
		if got := sipHashBytes(key, msg[:c.n]); got != c.want {
			t.Fatalf("SipHash-2-4 of %d bytes: %#x, want %#x", c.n, got, c.want)
		}
	}
	le := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
	k0, k1 := le(key[:8]), le(key[8:])
	if got, want := sipHash24(k0, k1, le(msg), le(msg[8:]), le(msg[16:])), uint64(0xb8ad50c6f649af94); got != want {
		t.Errorf("sipHash24 of 00..17: %#x, want %#x (vectors_sip64[24])", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var k [16]byte
		var m [24]byte
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		for i := range m {
			m[i] = byte(r.Uint32())
		}
		if got, want := sipHash24(le(k[:8]), le(k[8:]), le(m[:]), le(m[8:]), le(m[16:])), sipHashBytes(k, m[:]); got != want {
			t.Fatalf("key % x message % x: %#x, want %#x", k, m, got, want)
		}
	}
}

func TestSipHashAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { sipHash24(1, 2, 3, 4, 5) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
