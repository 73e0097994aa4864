package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/tools/flood"
)

func TestFlagsRefuseSpoofingOutsideTheLabRange(t *testing.T) {
	for _, spoof := range []string{"10.0.0.0/8", "198.18.0.0/24", "198.18.0.0/15", "0.0.0.0/0"} {
		_, err := parseFlags([]string{"-i", "eth0", "-target", "198.18.0.100:80", "-spoof", spoof}, io.Discard)
		if !errors.Is(err, flood.ErrSpoofRange) {
			t.Errorf("-spoof %s: %v, want a refusal", spoof, err)
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-i", "eth0", "-target", "198.18.0.100:80,8080", "-mode", "heads", "-source", "198.18.0.200",
		"-head", `GET / HTTP/1.1\r\nHost: x\r\n`, "-flows", "100000", "-duration", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Mode != flood.ModeHeads || len(o.cfg.Ports) != 2 || o.cfg.Ports[1] != 8080 || o.cfg.Flows != 100000 ||
		o.cfg.Source.String() != "198.18.0.200" || string(o.cfg.Head) != "GET / HTTP/1.1\r\nHost: x\r\n" {
		t.Fatalf("parsed %+v", o.cfg)
	}
	o, err = parseFlags([]string{"-i", "eth0", "-target", "198.18.0.100:80", "-mode", "heads", "-source", "198.18.0.200"}, io.Discard)
	if err != nil || string(o.cfg.Head) != flood.DefaultHead {
		t.Fatalf("default head %q (%v), want %q", o.cfg.Head, err, flood.DefaultHead)
	}
	for _, bad := range [][]string{
		{"-target", "198.18.0.100:80"}, // no interface
		{"-i", "eth0", "-target", "198.18.0.100"},
		{"-i", "eth0", "-target", "198.18.0.100:0"},
		{"-i", "eth0", "-target", "198.18.0.100:80", "-mode", "heads"}, // no source
		{"-i", "eth0", "-target", "198.18.0.100:80", "-mode", "ack"},
		{"-i", "eth0", "-target", "198.18.0.100:80", "-duration", "0"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	var help strings.Builder
	if _, err := parseFlags([]string{"-h"}, &help); !strings.Contains(help.String(), "198.18.128.0/17") {
		t.Errorf("-h (%v) does not name the spoof range:\n%s", err, help.String())
	}
}
