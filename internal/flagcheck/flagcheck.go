// Package flagcheck holds the checks the daemons' command lines share,
// so that both refuse a bad value in the same words before they open or
// create anything.
package flagcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// HostPort accepts what net.Listen("tcp", s) can bind: a host (or
// nothing) and a port number.
func HostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && strings.ContainsAny(host, " /:") {
			return fmt.Errorf("bad host %q", host)
		}
	}
	return nil
}

// Duration is a duration flag's name (without the dash) and value.
type Duration struct {
	Name  string
	Value time.Duration
}

// Positive refuses each of ds that is not > 0, in the words every
// command uses ("-linger 0s: must be > 0"); nil when all are.
func Positive(ds ...Duration) error {
	var errs []error
	for _, d := range ds {
		if d.Value <= 0 {
			errs = append(errs, fmt.Errorf("-%s %v: must be > 0", d.Name, d.Value))
		}
	}
	return errors.Join(errs...)
}

// Addrs reads a comma-separated list of IP addresses; empty items are
// skipped.
func Addrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Ports reads a comma-separated list of port numbers, 1..65535; empty
// items are skipped.
func Ports(s string) ([]uint16, error) {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}
