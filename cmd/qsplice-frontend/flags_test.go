package main

import "testing"

func TestParsePortRange(t *testing.T) {
	for _, c := range []struct {
		in          string
		first, last uint16
		ok          bool
	}{
		{"20000-60999", 20000, 60999, true},
		{" 1 - 65535 ", 1, 65535, true},
		{"5000-5000", 5000, 5000, true},
		{"0-10", 0, 0, false},
		{"10-9", 0, 0, false},
		{"10-65536", 0, 0, false},
		{"20000", 0, 0, false},
		{"a-b", 0, 0, false},
	} {
		f, l, err := parsePortRange(c.in)
		if (err == nil) != c.ok || f != c.first || l != c.last {
			t.Errorf("parsePortRange(%q) = %d, %d, %v; want %d, %d, ok %v", c.in, f, l, err, c.first, c.last, c.ok)
		}
	}
}
