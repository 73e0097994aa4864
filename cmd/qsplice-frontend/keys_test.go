package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/proto"
)

// genkey makes a private master key; derivekey the key of one back-end,
// which is what proto.DeriveKey gives; neither replaces a file.
func TestGenkeyAndDerivekey(t *testing.T) {
	dir := t.TempDir()
	master, be3 := filepath.Join(dir, "master.key"), filepath.Join(dir, "be3.key")
	var stderr bytes.Buffer
	if rc := genkey([]string{"-o", master}, &stderr); rc != 0 {
		t.Fatalf("genkey: %d, %s", rc, stderr.String())
	}
	if fi, err := os.Stat(master); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key: %v, %v", fi.Mode(), err)
	}
	if rc := derivekey([]string{"-master", master, "-backend", "3", "-o", be3}, &stderr); rc != 0 {
		t.Fatalf("derivekey: %d, %s", rc, stderr.String())
	}
	m, err := proto.LoadKey(master)
	if err != nil {
		t.Fatal(err)
	}
	got, err := proto.LoadKey(be3)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.DeriveKey(m, 3); !bytes.Equal(got, want) || bytes.Equal(got, m) {
		t.Fatalf("back-end 3's key %x, want %x (and not the master)", got, want)
	}
	stderr.Reset()
	if rc := genkey([]string{"-o", master}, &stderr); rc == 0 || !strings.Contains(stderr.String(), "exists") {
		t.Fatalf("genkey over an existing file: %d, %q", rc, stderr.String())
	}
	if rc := derivekey([]string{"-master", master, "-o", filepath.Join(dir, "x")}, &stderr); rc != 2 {
		t.Fatalf("derivekey without -backend: %d", rc)
	}
}
