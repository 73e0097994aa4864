package flood

import (
	"errors"
	"fmt"
	"net/netip"
)

// SpoofPrefix is the only range spoofed source addresses may come from:
// the upper half of 198.18.0.0/15 (RFC 2544, benchmarking), which the lab
// never assigns to a host (lab hosts are in 198.18.0.0/24).
var SpoofPrefix = netip.MustParsePrefix("198.18.128.0/17")

// ErrSpoofRange is returned for any spoof range outside SpoofPrefix.
var ErrSpoofRange = errors.New("flood: spoofed source addresses must come from " + SpoofPrefix.String())

// CheckSpoofPrefix accepts p only if every address in it lies inside
// SpoofPrefix (p itself, or a smaller prefix within it).
func CheckSpoofPrefix(p netip.Prefix) error {
	if !p.IsValid() || !p.Addr().Is4() {
		return fmt.Errorf("%w: %v is not an IPv4 prefix", ErrSpoofRange, p)
	}
	p = p.Masked()
	if p.Bits() < SpoofPrefix.Bits() || !SpoofPrefix.Contains(p.Addr()) {
		return fmt.Errorf("%w: refusing %v", ErrSpoofRange, p)
	}
	return nil
}

// inSpoofRange is the per-frame check: the last line of defence.
func inSpoofRange(a netip.Addr) bool { return SpoofPrefix.Contains(a) }
