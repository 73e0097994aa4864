package proto

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKeyFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.key")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadKey(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []byte
	}{
		{"hex with newline", "000102030405060708090a0b0c0d0e0f\n",
			[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"upper-case hex, padded", "  DEADBEEFDEADBEEFDEADBEEFDEADBEEF01 \n",
			[]byte{0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef, 0x01}},
		{"raw", "correct horse battery staple\n", []byte("correct horse battery staple")},
		{"raw, odd number of hex digits", "0123456789abcdef0", []byte("0123456789abcdef0")},
	} {
		got, err := LoadKey(writeKeyFile(t, tc.content))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: key %x, want %x", tc.name, got, tc.want)
		}
	}
}

func TestLoadKeyTooShort(t *testing.T) {
	for _, content := range []string{
		"",
		"\n",
		"short raw key\n",                  // 13 bytes raw
		"000102030405060708090a0b0c0d0e\n", // 15 bytes once decoded
	} {
		path := writeKeyFile(t, content)
		key, err := LoadKey(path)
		if err == nil {
			t.Errorf("LoadKey(%q) = %x, want an error", content, key)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the file %s", err, path)
		}
	}
}

func TestLoadKeyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.key")
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadKey of a missing file: got %v, want an error naming %s", err, path)
	}
}

// A loaded key must work as a key: what one side seals, the other opens.
func TestLoadKeyUsable(t *testing.T) {
	key, err := LoadKey(writeKeyFile(t, "00112233445566778899aabbccddeeff\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmarshal(key, mustMarshal(t, key, &Keepalive{Seq: 1})); err != nil {
		t.Fatal(err)
	}
}
