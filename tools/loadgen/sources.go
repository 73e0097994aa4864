package loadgen

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
)

// Source addresses. The feedback policy's content adaptor hashes each
// client's address to decide its tree, so a load from one address sees
// one quality: all or nothing. Config.Sources spreads the connections
// over many local addresses (in the lab, extra addresses of the client
// namespace), in turn, as many clients would.

// maxSources bounds the addresses a -sources value may expand to.
const maxSources = 4096

// ParseSources reads a comma-separated list of IPv4 addresses and
// prefixes (a prefix stands for every address in it).
func ParseSources(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if p, err := netip.ParsePrefix(part); err == nil {
			if !p.Addr().Is4() || p.Bits() < 32-12 {
				return nil, fmt.Errorf("source prefix %s: want IPv4, at most %d addresses", part, maxSources)
			}
			for a := p.Masked().Addr(); p.Contains(a); a = a.Next() {
				out = append(out, a)
			}
		} else if a, err := netip.ParseAddr(part); err == nil && a.Is4() {
			out = append(out, a)
		} else {
			return nil, fmt.Errorf("source %q: not an IPv4 address or prefix", part)
		}
		if len(out) > maxSources {
			return nil, fmt.Errorf("more than %d source addresses", maxSources)
		}
	}
	return out, nil
}

// sourceRing hands out local addresses in turn; nil or empty: the
// kernel's choice.
type sourceRing struct {
	addrs []*net.TCPAddr
	n     atomic.Uint64
}

func newSourceRing(addrs []netip.Addr) *sourceRing {
	r := &sourceRing{}
	for _, a := range addrs {
		r.addrs = append(r.addrs, net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	}
	return r
}

func (r *sourceRing) next() net.Addr {
	if r == nil || len(r.addrs) == 0 {
		return nil
	}
	return r.addrs[(r.n.Add(1)-1)%uint64(len(r.addrs))]
}
