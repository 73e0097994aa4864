package replay

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/three-clients.pcap and its golden hash")

const (
	goldenInput = "testdata/three-clients.pcap"
	goldenHash  = "testdata/three-clients.golden"
)

// TestGolden replays the committed capture and compares the SHA-256 of
// the output with the committed one. A difference means the engine (or the
// replay) now sends other bytes: inspect both outputs with tshark, and if
// the change is intended regenerate with
//
//	go test ./tools/replay -run TestGolden -update
func TestGolden(t *testing.T) {
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenInput), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenInput, threeClients(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := os.ReadFile(goldenInput)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	if len(in) >= 20<<10 {
		t.Errorf("%s is %d bytes; keep it under 20 KB", goldenInput, len(in))
	}
	out, _ := replay(t, Config{}, in)
	h := sum256(out)
	got := hex.EncodeToString(h[:])
	if *update {
		if err := os.WriteFile(goldenHash, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s and %s (%s)", goldenInput, goldenHash, got)
		return
	}
	want, err := os.ReadFile(goldenHash)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	if got != strings.TrimSpace(string(want)) {
		// Kept on purpose after the test, for comparing with tshark.
		failed := filepath.Join(os.TempDir(), "qsplice-replay-three-clients.out.pcap")
		if err := os.WriteFile(failed, out, 0o644); err != nil {
			t.Log(err)
		}
		t.Errorf("replay of %s hashes to %s, golden is %s; output written to %s",
			goldenInput, got, strings.TrimSpace(string(want)), failed)
	}
	// The committed input is what the builder makes: a builder change that
	// is not committed would otherwise go unnoticed.
	if !bytes.Equal(in, threeClients(t)) {
		t.Errorf("%s differs from what threeClients builds; regenerate with -update", goldenInput)
	}
}
