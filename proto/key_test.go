package proto

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// randomHex is a key as genkey writes it.
const randomHex = "3f9c2a51d07be48816fa3c92e5017d6bb4c8e02f9a7153dd06e1b87c4f2a9d30"

func writeKeyFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.key")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

func TestLoadKey(t *testing.T) {
	want, _ := hex.DecodeString(randomHex)
	for _, content := range []string{randomHex, randomHex + "\n", "  " + strings.ToUpper(randomHex) + " \n"} {
		got, err := LoadKey(writeKeyFile(t, content, 0o600))
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q: key %x, want %x", content, got, want)
		}
	}
	if _, err := LoadKey(writeKeyFile(t, randomHex, 0o400)); err != nil {
		t.Errorf("read-only for its owner: %v", err)
	}
}

// TestAdversarialWeakKeyFiles: key files an attacker could read, or keys
// one could guess, are refused with an error naming the file (the
// starting code accepted world-readable, all-zero and text keys).
func TestAdversarialWeakKeyFiles(t *testing.T) {
	zero := strings.Repeat("00", 32)
	text := hex.EncodeToString([]byte("Quick brown fox jumps, lazy dog!"))
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"world-readable", randomHex, 0o644, "mode 0644"},
		{"group-readable", randomHex, 0o640, "mode 0640"},
		{"group-writable", randomHex, 0o620, "mode 0620"},
		{"empty", "", 0o600, "not a key in hex"},
		{"passphrase", "correct horse battery staple, which is long enough\n", 0o600, "not a key in hex"},
		{"odd number of digits", randomHex[1:], 0o600, "not a key in hex"},
		{"too short", randomHex[:62], 0o600, "31 bytes"},
		{"all zero", zero, 0o600, "different byte values"},
		{"one repeated byte", strings.Repeat("a7", 40), 0o600, "different byte values"},
		{"short pattern", strings.Repeat("0123456789abcdef", 4), 0o600, "different byte values"},
		{"text as hex", text, 0o600, "printable"},
	} {
		path := writeKeyFile(t, tc.content, tc.mode)
		key, err := LoadKey(path)
		if err == nil {
			t.Errorf("%s: LoadKey = %x, want an error", tc.name, key)
			continue
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q should name %s and say %q", tc.name, err, path, tc.want)
		}
	}
}

func TestLoadKeyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.key")
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadKey of a missing file: got %v, want an error naming %s", err, path)
	}
}

// GenerateKey's keys pass CheckKey, differ, and round-trip through
// WriteKeyFile (mode 0600, no overwriting) and LoadKey.
func TestGenerateAndWriteKey(t *testing.T) {
	a, b := GenerateKey(), GenerateKey()
	if len(a) != KeyLen || bytes.Equal(a, b) {
		t.Fatalf("GenerateKey gave %x and %x", a, b)
	}
	path := filepath.Join(t.TempDir(), "master.key")
	if err := WriteKeyFile(path, a); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if got, err := LoadKey(path); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("LoadKey = %x, %v; want %x", got, err, a)
	}
	if err := WriteKeyFile(path, b); err == nil {
		t.Fatal("WriteKeyFile replaced an existing key file")
	}
	if err := WriteKeyFile(filepath.Join(t.TempDir(), "weak.key"), make([]byte, 32)); !errors.Is(err, ErrWeakKey) {
		t.Fatalf("WriteKeyFile of an all-zero key: %v", err)
	}
}

// TestDeriveKey: DeriveKey is HKDF-SHA256 as RFC 5869 defines it (the
// vector was computed with Python's hmac module from the RFC's steps),
// and the keyring's allocation-free derivation gives the same keys.
func TestDeriveKey(t *testing.T) {
	master := make([]byte, 32)
	for i := range master {
		master[i] = byte(i)
	}
	got, err := DeriveKey(master, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := "e5eca14206e4f174ab7b43c9dcf5ba11fe43bf6080ea31f543d9e5b25238b3ba"; hex.EncodeToString(got) != want {
		t.Fatalf("DeriveKey(0..31, 3) = %x, want %s", got, want)
	}
	m := newMacer()
	ring, err := newKeyring(m, master)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{1, 2, 3, 99, 1<<32 - 1} {
		want, _ := hkdf.Key(sha256.New, master, nil, "qsplice control v3 backend "+itoa(id), KeyLen)
		var k, ref macKey
		ring.derive(m, id, &k)
		ref.set(m, want)
		if k != ref {
			t.Errorf("back-end %d: the keyring derives another key than crypto/hkdf", id)
		}
	}
}

func itoa(id uint32) string { return string(keyInfo(nil, id)[len("qsplice control v3 backend "):]) }

// The hand-made HMAC matches crypto/hmac for short, block-sized and long
// keys.
func TestMacMatchesCryptoHMAC(t *testing.T) {
	m := newMacer()
	for _, n := range []int{0, 16, 32, 64, 65, 200} {
		key := bytes.Repeat([]byte{byte(n + 1)}, n)
		var k macKey
		k.set(m, key)
		ref := hmac.New(sha256.New, key)
		ref.Write([]byte("header"))
		ref.Write([]byte("body"))
		if got := m.mac(&k, []byte("header"), []byte("body")); !bytes.Equal(got, ref.Sum(nil)) {
			t.Errorf("key of %d bytes: %x, want %x", n, got, ref.Sum(nil))
		}
	}
}
