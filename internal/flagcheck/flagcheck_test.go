package flagcheck

import "testing"

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
