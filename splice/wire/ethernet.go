package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// MAC is an Ethernet address.
type MAC [6]byte

// BroadcastMAC is ff:ff:ff:ff:ff:ff.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// ParseMAC parses the colon-separated hex form.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, fmt.Errorf("wire: bad MAC %q", s)
	}
	for i := 0; i < 6; i++ {
		if i > 0 && s[3*i-1] != ':' {
			return m, fmt.Errorf("wire: bad MAC %q", s)
		}
		hi, ok1 := unhex(s[3*i])
		lo, ok2 := unhex(s[3*i+1])
		if !ok1 || !ok2 {
			return m, fmt.Errorf("wire: bad MAC %q", s)
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// IP4 is an IPv4 address in network byte order; cheaper than netip.Addr
// on the per-packet path.
type IP4 [4]byte

// IP4From converts; it panics on a non-IPv4 address (callers validate
// configuration before that).
func IP4From(a netip.Addr) IP4 {
	if !a.Is4() {
		panic("wire: not an IPv4 address: " + a.String())
	}
	return a.As4()
}

// Addr converts back to netip.Addr.
func (a IP4) Addr() netip.Addr { return netip.AddrFrom4(a) }
func (a IP4) String() string   { return a.Addr().String() }

// Ethernet header layout.
const (
	EthernetHeaderLen = 14
	EtherTypeIPv4     = 0x0800
	EtherTypeARP      = 0x0806
	EtherTypeVLAN     = 0x8100
)

// Ethernet is a view of an Ethernet II frame; at least 14 bytes long.
type Ethernet []byte

func (e Ethernet) Dst() MAC          { return MAC(e[0:6]) }
func (e Ethernet) Src() MAC          { return MAC(e[6:12]) }
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[12:]) }
func (e Ethernet) SetDst(m MAC)      { copy(e[0:6], m[:]) }
func (e Ethernet) SetSrc(m MAC)      { copy(e[6:12], m[:]) }
func (e Ethernet) SetEtherType(t uint16) {
	binary.BigEndian.PutUint16(e[12:], t)
}
func (e Ethernet) Payload() []byte { return e[EthernetHeaderLen:] }
