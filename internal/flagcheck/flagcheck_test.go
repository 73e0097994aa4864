package flagcheck

import (
	"testing"
	"time"
)

func TestHostPort(t *testing.T) {
	for _, ok := range []string{"198.18.0.2:7404", ":7404", "localhost:80", "[::1]:9"} {
		if err := HostPort(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"198.18.0.2", "198.18.0.2:99999", "a b:80", "x/y:1", ":port"} {
		if err := HostPort(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPositive(t *testing.T) {
	if err := Positive(Duration{"linger", time.Second}, Duration{"idle-timeout", time.Nanosecond}); err != nil {
		t.Errorf("positive durations refused: %v", err)
	}
	err := Positive(Duration{"linger", 0}, Duration{"keepalive", time.Second}, Duration{"idle-timeout", -time.Second})
	if err == nil || err.Error() != "-linger 0s: must be > 0\n-idle-timeout -1s: must be > 0" {
		t.Errorf("got %v, want the two refusals in order", err)
	}
}

func TestAddrsAndPorts(t *testing.T) {
	a, err := Addrs(" 198.18.0.100, ,198.18.0.101")
	if err != nil || len(a) != 2 || a[1].String() != "198.18.0.101" {
		t.Errorf("Addrs: %v %v", a, err)
	}
	if _, err := Addrs("198.18.0.300"); err == nil {
		t.Error("Addrs took a bad address")
	}
	p, err := Ports("80, 8080,")
	if err != nil || len(p) != 2 || p[1] != 8080 {
		t.Errorf("Ports: %v %v", p, err)
	}
	for _, bad := range []string{"0", "65536", "http"} {
		if _, err := Ports(bad); err == nil || err.Error() != `bad port "`+bad+`"` {
			t.Errorf("Ports(%q): %v", bad, err)
		}
	}
}
