package wire

// Seq is a TCP sequence number (or any 32-bit number that wraps, such as a
// timestamp). Comparisons are modulo 2^32: a is before b when the signed
// distance from b to a is negative, which is right as long as the two are
// less than 2^31 apart (RFC 793 section 3.3, RFC 7323 section 5.2).
type Seq uint32

// LessThan reports whether s comes strictly before t.
func (s Seq) LessThan(t Seq) bool { return int32(s-t) < 0 }

// LessEq reports whether s comes before t or equals it.
func (s Seq) LessEq(t Seq) bool { return int32(s-t) <= 0 }

// Add returns s advanced by n (which may be negative).
func (s Seq) Add(n int32) Seq { return s + Seq(n) }

// Sub returns the signed distance s - t.
func (s Seq) Sub(t Seq) int32 { return int32(s - t) }

// InRange reports whether s lies in [lo, hi).
func (s Seq) InRange(lo, hi Seq) bool { return lo.LessEq(s) && s.LessThan(hi) }

// Max returns the later of s and t.
func (s Seq) Max(t Seq) Seq {
	if s.LessThan(t) {
		return t
	}
	return s
}

// Min returns the earlier of s and t.
func (s Seq) Min(t Seq) Seq {
	if t.LessThan(s) {
		return t
	}
	return s
}
