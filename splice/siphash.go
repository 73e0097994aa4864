package splice

import "math/bits"

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, 2012) with the key
// k0 || k1 (each the little-endian load of eight key bytes) of the
// 24-byte message whose bytes are the little-endian w0, w1, w2: three
// compressions, then the final block of the length alone. The SYN cookie
// keys its MAC with it (cookieMAC): a pseudo-random function built for
// short inputs, cheap enough for a TC program to compute the same MAC
// (splice/link/synanswer_prog.go), as Linux computes its own SYN
// cookies with it.
func sipHash24(k0, k1, w0, w1, w2 uint64) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	for _, m := range [4]uint64{w0, w1, w2, 24 << 56} {
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
