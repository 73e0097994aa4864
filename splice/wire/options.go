package wire

import (
	"encoding/binary"
	"errors"
)

// TCP option kinds qsplice understands.
const (
	OptEOL           = 0
	OptNOP           = 1
	OptMSS           = 2
	OptWScale        = 3
	OptSACKPermitted = 4
	OptSACK          = 5
	OptTimestamps    = 8
	OptFastOpen      = 34 // RFC 7413's cookie

	// MinFastOpenCookie and MaxFastOpenCookie bound a cookie's length
	// (RFC 7413 section 4.1.1).
	MinFastOpenCookie = 4
	MaxFastOpenCookie = 16

	// MaxWScale is the largest shift RFC 7323 allows; larger values are
	// treated as 14.
	MaxWScale = 14
	// MaxSACKBlocks fits in 40 option bytes.
	MaxSACKBlocks = 4
)

// Option parsing errors. A segment with any of these is counted and
// dropped by the engine rather than half-translated.
var (
	ErrOptionLength    = errors.New("wire: TCP option runs past the header")
	ErrOptionDuplicate = errors.New("wire: duplicate TCP option")
	ErrOptionMalformed = errors.New("wire: malformed TCP option")
)

// SACKBlock is one [Left, Right) block of a SACK option.
type SACKBlock struct{ Left, Right Seq }

// TCPOptions is what ParseOptions found. Offsets are from the start of the
// TCP header so the engine can rewrite values in place; zero means absent
// (no option can start before byte 20).
type TCPOptions struct {
	MSS           uint16
	WScale        uint8
	TSVal, TSEcr  uint32
	SACKBlocks    [MaxSACKBlocks]SACKBlock
	NumSACK       int
	HasMSS        bool
	HasWScale     bool
	SACKPermitted bool
	HasTS         bool
	// TSOffset is the offset of the TSval field (TSecr follows it).
	TSOffset int
	// SACKOffset is the offset of the first block's left edge.
	SACKOffset int
	// FastOpenOffset is the offset of the first Fast Open option's kind
	// byte, CookieLen its cookie's length (0: a cookie request).
	FastOpenOffset int
	CookieLen      int
}

// Cookie is the Fast Open cookie of t, whose options o describe; nil when
// there is none.
func (o *TCPOptions) Cookie(t TCP) []byte {
	if o.FastOpenOffset == 0 || o.CookieLen == 0 {
		return nil
	}
	return t[o.FastOpenOffset+2 : o.FastOpenOffset+2+o.CookieLen]
}

// ParseOptions decodes the options of segment t into o. It tolerates any
// alignment and unknown options, and rejects lengths that run past the
// header, duplicates of the options it rewrites (a second timestamp would
// otherwise escape translation) and wrong fixed lengths.
func ParseOptions(t TCP, o *TCPOptions) error {
	*o = TCPOptions{}
	end := t.HeaderLen()
	i := TCPMinHeaderLen
	for i < end {
		kind := t[i]
		switch kind {
		case OptEOL:
			return nil
		case OptNOP:
			i++
			continue
		}
		if i+1 >= end {
			return ErrOptionLength
		}
		l := int(t[i+1])
		if l < 2 {
			return ErrOptionMalformed
		}
		if i+l > end {
			return ErrOptionLength
		}
		switch kind {
		case OptMSS:
			if l != 4 {
				return ErrOptionMalformed
			}
			if o.HasMSS {
				return ErrOptionDuplicate
			}
			o.HasMSS = true
			o.MSS = binary.BigEndian.Uint16(t[i+2:])
		case OptWScale:
			if l != 3 {
				return ErrOptionMalformed
			}
			if o.HasWScale {
				return ErrOptionDuplicate
			}
			o.HasWScale = true
			o.WScale = min(t[i+2], MaxWScale)
		case OptSACKPermitted:
			if l != 2 {
				return ErrOptionMalformed
			}
			o.SACKPermitted = true
		case OptTimestamps:
			if l != 10 {
				return ErrOptionMalformed
			}
			if o.HasTS {
				return ErrOptionDuplicate
			}
			o.HasTS = true
			o.TSOffset = i + 2
			o.TSVal = binary.BigEndian.Uint32(t[i+2:])
			o.TSEcr = binary.BigEndian.Uint32(t[i+6:])
		case OptSACK:
			if (l-2)%8 != 0 || l == 2 {
				return ErrOptionMalformed
			}
			if o.SACKOffset != 0 {
				return ErrOptionDuplicate
			}
			o.SACKOffset = i + 2
			n := (l - 2) / 8
			if n > MaxSACKBlocks {
				return ErrOptionMalformed
			}
			o.NumSACK = n
			for k := 0; k < n; k++ {
				p := i + 2 + 8*k
				o.SACKBlocks[k] = SACKBlock{
					Left:  Seq(binary.BigEndian.Uint32(t[p:])),
					Right: Seq(binary.BigEndian.Uint32(t[p+4:])),
				}
			}
		case OptFastOpen:
			// Nothing is rewritten in it, so neither a second one nor a
			// cookie of a length RFC 7413 does not allow makes the
			// segment malformed: the first good one counts.
			if n := l - 2; o.FastOpenOffset == 0 && (n == 0 || n >= MinFastOpenCookie && n <= MaxFastOpenCookie) {
				o.FastOpenOffset, o.CookieLen = i, n
			}
		}
		i += l
	}
	return nil
}

// SynOptions are the options a SYN or SYN-ACK carries.
type SynOptions struct {
	MSS           uint16 // 0: omit
	WScale        int    // -1: omit
	SACKPermitted bool
	TS            bool
	TSVal, TSEcr  uint32
	// FastOpen asks the peer for a Fast Open cookie (an empty cookie
	// option, RFC 7413 section 4.1.1), or, with Cookie, sends that cookie
	// (MinFastOpenCookie to MaxFastOpenCookie bytes) for the data the
	// segment carries (section 4.1.2).
	FastOpen bool
	Cookie   []byte
}

// SynOptionsLen is the encoded length of o (a multiple of 4).
func (o *SynOptions) Len() int {
	n := 0
	if o.MSS != 0 {
		n += 4
	}
	switch {
	case o.TS:
		n += 12 // SACK-permitted rides in the timestamp option's padding
	case o.SACKPermitted:
		n += 4
	}
	if o.WScale >= 0 {
		n += 4
	}
	if o.FastOpen {
		n += (2 + len(o.Cookie) + 3) &^ 3
	}
	return n
}

// Encode writes o into b (at least o.Len() bytes) in the order Linux uses,
// each option aligned: MSS; SACK-permitted+timestamps (or NOPs in place of
// SACK-permitted); NOP+window scale; NOP NOP+Fast Open cookie request. It
// returns the length written.
func (o *SynOptions) Encode(b []byte) int {
	n := 0
	if o.MSS != 0 {
		b[0], b[1] = OptMSS, 4
		binary.BigEndian.PutUint16(b[2:], o.MSS)
		n = 4
	}
	if o.TS {
		if o.SACKPermitted {
			b[n], b[n+1] = OptSACKPermitted, 2
		} else {
			b[n], b[n+1] = OptNOP, OptNOP
		}
		b[n+2], b[n+3] = OptTimestamps, 10
		binary.BigEndian.PutUint32(b[n+4:], o.TSVal)
		binary.BigEndian.PutUint32(b[n+8:], o.TSEcr)
		n += 12
	} else if o.SACKPermitted {
		b[n], b[n+1], b[n+2], b[n+3] = OptNOP, OptNOP, OptSACKPermitted, 2
		n += 4
	}
	if o.WScale >= 0 {
		b[n], b[n+1], b[n+2], b[n+3] = OptNOP, OptWScale, 3, byte(o.WScale)
		n += 4
	}
	if o.FastOpen && len(o.Cookie) > 0 {
		// Kind, length and cookie, NOPs after to the next word, as the
		// shim writes it over a cookie request (and Linux sends it).
		end := n + 2 + len(o.Cookie)
		b[n], b[n+1] = OptFastOpen, byte(2+len(o.Cookie))
		copy(b[n+2:], o.Cookie)
		for n = end; n%4 != 0; n++ {
			b[n] = OptNOP
		}
	} else if o.FastOpen {
		b[n], b[n+1], b[n+2], b[n+3] = OptNOP, OptNOP, OptFastOpen, 2
		n += 4
	}
	return n
}

// TSOptionLen is the length of the aligned timestamp option (NOP NOP TS)
// that non-SYN segments built by qsplice carry.
const TSOptionLen = 12

// EncodeTS writes NOP NOP TS(val, ecr) into b.
func EncodeTS(b []byte, val, ecr uint32) int {
	b[0], b[1], b[2], b[3] = OptNOP, OptNOP, OptTimestamps, 10
	binary.BigEndian.PutUint32(b[4:], val)
	binary.BigEndian.PutUint32(b[8:], ecr)
	return TSOptionLen
}
