package wire

import "encoding/binary"

// Sum adds b to an unfolded one's-complement accumulator, as 16-bit
// big-endian words; an odd trailing byte is padded with zero. Call Fold on
// the result. Sums of consecutive pieces may be chained only when every
// piece but the last has even length.
func Sum(b []byte, acc uint32) uint32 {
	sum := uint64(acc)
	for len(b) >= 8 {
		sum += uint64(binary.BigEndian.Uint32(b))
		sum += uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	// Fold 64 -> 32 bits with end-around carry so the accumulator stays a
	// valid partial sum that callers can chain.
	for sum>>32 != 0 {
		sum = (sum & 0xffffffff) + (sum >> 32)
	}
	return uint32(sum)
}

// Fold reduces an accumulator to 16 bits with end-around carry. The
// checksum field is the complement of the folded sum: ^Fold(acc).
func Fold(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = (acc & 0xffff) + (acc >> 16)
	}
	return uint16(acc)
}

// Checksum returns the Internet checksum (RFC 1071) of b, ready to store.
func Checksum(b []byte) uint16 { return ^Fold(Sum(b, 0)) }

// PseudoHeaderSum is the unfolded sum of the IPv4 pseudo-header used by TCP
// and UDP checksums.
func PseudoHeaderSum(src, dst IP4, proto uint8, length uint16) uint32 {
	s := uint32(binary.BigEndian.Uint16(src[0:])) + uint32(binary.BigEndian.Uint16(src[2:]))
	s += uint32(binary.BigEndian.Uint16(dst[0:])) + uint32(binary.BigEndian.Uint16(dst[2:]))
	s += uint32(proto) + uint32(length)
	return s
}

// UpdateChecksum16 returns the checksum field after one 16-bit word of the
// covered data changed from old to new: RFC 1624 equation 3,
// HC' = ~(~HC + ~m + m'), which unlike equation 2 never yields 0xffff
// ("negative zero") from a canonical input.
func UpdateChecksum16(check, old, new uint16) uint16 {
	sum := uint32(^check) + uint32(^old) + uint32(new)
	return finishUpdate(sum)
}

// finishUpdate folds and complements an incremental sum. The sum is zero
// only when the stored checksum was 0xffff (the other one's-complement
// zero, which senders may emit and receivers accept) and every replaced
// word went from all ones to all zeros; equation 3 would then give 0xffff.
// The value is zero either way, and a full computation over an IPv4 header
// or a TCP segment (never all-zero data) stores it as 0x0000, so do that.
func finishUpdate(sum uint32) uint16 {
	if sum == 0 {
		return 0
	}
	return ^Fold(sum)
}

// UpdateChecksum32 is UpdateChecksum16 for an aligned 32-bit field such as
// a sequence number, a timestamp or an IPv4 address.
func UpdateChecksum32(check uint16, old, new uint32) uint16 {
	sum := uint32(^check)
	sum += uint32(^uint16(old>>16)) + uint32(^uint16(old))
	sum += uint32(uint16(new>>16)) + uint32(uint16(new))
	return finishUpdate(sum)
}

// UpdateChecksumRegion updates check for new bytes in a region of the
// summed data that starts at an even offset: oldSum and newSum are the
// folded sums (Fold(Sum(region, 0))) of the region before and after. It
// is equation 3 of RFC 1624 with the region for the 16-bit field.
func UpdateChecksumRegion(check, oldSum, newSum uint16) uint16 {
	return finishUpdate(uint32(^check) + uint32(^oldSum) + uint32(newSum))
}

// UpdateChecksumUnaligned updates check for a 32-bit value that starts at
// an odd byte offset of the summed data (for example a timestamp behind a
// single NOP). Its bytes b0..b3 then contribute b0 as the low byte of one
// word, b1b2 as the next word and b3 as the high byte of a third; each of
// those partial contributions is replaced as in equation 3.
func UpdateChecksumUnaligned(check uint16, old, new uint32) uint16 {
	sum := uint32(^check)
	sum += uint32(^uint16(old>>24)) + uint32(^uint16(old>>8)) + uint32(^uint16(old<<8))
	sum += uint32(uint16(new>>24)) + uint32(uint16(new>>8)) + uint32(uint16(new<<8))
	return finishUpdate(sum)
}

// UpdateChecksumAt updates check for a 32-bit value at byte offset off of
// the summed data, aligned or not.
func UpdateChecksumAt(check uint16, off int, old, new uint32) uint16 {
	if off&1 == 0 {
		return UpdateChecksum32(check, old, new)
	}
	return UpdateChecksumUnaligned(check, old, new)
}
