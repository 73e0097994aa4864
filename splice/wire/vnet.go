package wire

import (
	"encoding/binary"
	"errors"
)

// VNetHdr is the virtio-net header (struct virtio_net_hdr of
// <linux/virtio_net.h>, 10 bytes) that a TAP opened with IFF_VNET_HDR and
// an AF_PACKET socket with PACKET_VNET_HDR put in front of every frame.
// It is how the kernel hands over, and accepts, offloaded work:
//
//   - NEEDS_CSUM: the transport checksum is not computed. The field at
//     CsumStart+CsumOffset holds the folded, NOT complemented, sum of the
//     pseudo-header; the device sums from CsumStart to the end into it.
//     Changing a pseudo-header field (an address) must therefore update
//     that field as a plain one's-complement sum (AdjustPartialChecksum),
//     and changing anything else (ports, sequence numbers, options) must
//     leave it alone.
//   - GSOType != GSONone: the frame is a TCP super-frame of up to 64 KiB
//     whose payload the device cuts into GSOSize-byte segments, each with
//     the headers (HdrLen bytes) copied, sequence numbers advanced and
//     checksums completed. A super-frame always has NEEDS_CSUM set.
//   - DATA_VALID: (receive only) the checksum was already verified.
//
// The header is little-endian (native) on every architecture Linux runs
// virtio-net with the legacy header; qsplice supports little-endian hosts
// only, which is what the kernel uses for the TUN/AF_PACKET header there.
type VNetHdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // Ethernet+IP+TCP header bytes (a hint on receive)
	GSOSize    uint16 // payload bytes per segment (the MSS)
	CsumStart  uint16 // offset of the transport header from the frame start
	CsumOffset uint16 // offset of the checksum field from CsumStart
}

// VNetHdrLen is the size of the header on the wire (no num_buffers field:
// that belongs to the mergeable-buffers variant neither TAP nor AF_PACKET
// uses here).
const VNetHdrLen = 10

// VNetHdr flags and GSO types.
const (
	VNetFlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	VNetFlagDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID

	GSONone  = 0    // VIRTIO_NET_HDR_GSO_NONE
	GSOTCPv4 = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	GSOUDP   = 3    // VIRTIO_NET_HDR_GSO_UDP
	GSOTCPv6 = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	GSOUDPL4 = 5    // VIRTIO_NET_HDR_GSO_UDP_L4
	GSOECN   = 0x80 // VIRTIO_NET_HDR_GSO_ECN: the super-frame carries CWR
)

// ErrShortVNetHdr is returned when fewer than VNetHdrLen bytes are given.
var ErrShortVNetHdr = errors.New("wire: shorter than a virtio-net header")

// DecodeVNetHdr reads a header from the first VNetHdrLen bytes of b.
func DecodeVNetHdr(b []byte) (VNetHdr, error) {
	if len(b) < VNetHdrLen {
		return VNetHdr{}, ErrShortVNetHdr
	}
	return VNetHdr{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.LittleEndian.Uint16(b[2:]),
		GSOSize:    binary.LittleEndian.Uint16(b[4:]),
		CsumStart:  binary.LittleEndian.Uint16(b[6:]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:]),
	}, nil
}

// Encode writes h into the first VNetHdrLen bytes of b, which must be
// long enough.
func (h VNetHdr) Encode(b []byte) {
	_ = b[VNetHdrLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.LittleEndian.PutUint16(b[2:], h.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], h.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], h.CsumOffset)
}

// NeedsCsum reports whether the transport checksum is left to the device.
func (h VNetHdr) NeedsCsum() bool { return h.Flags&VNetFlagNeedsCsum != 0 }

// IsGSO reports whether the frame is a super-frame to be segmented.
func (h VNetHdr) IsGSO() bool { return h.GSOType&^GSOECN != GSONone }

// AdjustPartialChecksum returns the partial (pseudo-header) checksum field
// of a NEEDS_CSUM frame after a 32-bit pseudo-header field (an IPv4
// address) changed from old to new. The field holds a folded sum that is
// not complemented, so the change is added as a plain one's-complement
// sum: S' = S + ~old + new. Using RFC 1624's complemented form here would
// corrupt every segment the device then completes.
func AdjustPartialChecksum(partial uint16, old, new uint32) uint16 {
	sum := uint32(partial)
	sum += uint32(^uint16(old>>16)) + uint32(^uint16(old))
	sum += uint32(uint16(new>>16)) + uint32(uint16(new))
	return Fold(sum)
}
