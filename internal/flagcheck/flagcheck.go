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
