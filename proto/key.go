package proto

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// Key files.
//
// A key file holds one key as hex digits (upper or lower case), with
// leading and trailing whitespace ignored: the front-end's holds the
// master key, each back-end's the key [DeriveKey] derives for it. LoadKey
// refuses, with an error naming the file:
//
//   - a file that its group or others may read or write (mode & 0o077);
//   - content that is not an even number of hex digits (a passphrase, a
//     raw binary key);
//   - a key shorter than MinKeyLen bytes;
//   - a key that does not look random: fewer than minDistinctBytes
//     different byte values, or only printable ASCII bytes (a text
//     encoded as hex). 32 random bytes hold about 30 different values and
//     are all printable with probability 2^-45, so a generated key
//     passes these checks, and all-zero, repeated-byte, short-pattern
//     and text keys fail them.
//
// GenerateKey and WriteKeyFile make keys that pass; `qsplice-frontend
// genkey` and `derivekey` use them.

// MinKeyLen is the shortest key LoadKey accepts: 256 bits.
const MinKeyLen = KeyLen

// minDistinctBytes is the fewest different byte values a key must hold.
const minDistinctBytes = 20

// ErrWeakKey is what LoadKey and CheckKey return, wrapped, for a key
// that is too short or does not look random.
var ErrWeakKey = errors.New("proto: weak key")

// CheckKey applies LoadKey's length and randomness rules to key.
func CheckKey(key []byte) error {
	if len(key) < MinKeyLen {
		return fmt.Errorf("%w: %d bytes, need at least %d", ErrWeakKey, len(key), MinKeyLen)
	}
	var seen [256]bool
	distinct, printable := 0, true
	for _, b := range key {
		if !seen[b] {
			seen[b] = true
			distinct++
		}
		if b < 0x20 || b > 0x7e {
			printable = false
		}
	}
	if distinct < minDistinctBytes {
		return fmt.Errorf("%w: only %d different byte values, a random key has about 30 (generate one with genkey)", ErrWeakKey, distinct)
	}
	if printable {
		return fmt.Errorf("%w: every byte is printable text, not a random key (generate one with genkey)", ErrWeakKey)
	}
	return nil
}

// LoadKey reads a key file (see the rules above).
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("proto: reading key: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("proto: reading key: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("proto: key file %s has mode %04o: group or others may access it; chmod 600 %s", path, perm, path)
	}
	content, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("proto: reading key: %w", err)
	}
	text := bytes.TrimSpace(content)
	key := make([]byte, hex.DecodedLen(len(text)))
	if _, err := hex.Decode(key, text); err != nil || len(text)%2 != 0 || len(text) == 0 {
		return nil, fmt.Errorf("proto: key file %s: not a key in hex (generate one with genkey)", path)
	}
	if err := CheckKey(key); err != nil {
		return nil, fmt.Errorf("proto: key file %s: %w", path, err)
	}
	return key, nil
}

// GenerateKey returns a new random key of KeyLen bytes from the system's
// random source.
func GenerateKey() []byte {
	key := make([]byte, KeyLen)
	for {
		rand.Read(key) // never fails (crypto/rand, Go 1.24 on)
		if CheckKey(key) == nil {
			return key
		}
	}
}

// WriteKeyFile writes key in hex to a new file at path with mode 0600. It
// refuses to replace an existing file: a key file is a secret someone
// made on purpose.
func WriteKeyFile(path string, key []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("proto: writing key: %w", err)
	}
	if err := f.Chmod(0o600); err != nil { // whatever the umask
		f.Close()
		return fmt.Errorf("proto: writing key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("proto: writing key: %w", err)
	}
	return f.Close()
}
