package proto

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
)

// MinKeyLen is the shortest key LoadKey accepts: 128 bits, the length of
// the tag, so guessing the key is no easier than guessing a tag.
const MinKeyLen = 16

// LoadKey reads the shared control-protocol key from a file. Leading and
// trailing whitespace is dropped; if what remains is an even number of hex
// digits it is hex-decoded, otherwise its bytes are the key. A raw key that
// happens to be all hex digits is therefore read as hex: store keys in hex
// (for example `head -c 32 /dev/urandom | xxd -p -c 64`). A key shorter
// than MinKeyLen bytes is an error that names the file.
func LoadKey(path string) ([]byte, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proto: reading key: %w", err)
	}
	key := bytes.TrimSpace(content)
	if decoded, err := hex.DecodeString(string(key)); err == nil {
		key = decoded
	}
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("proto: key file %s: key has %d bytes, need at least %d", path, len(key), MinKeyLen)
	}
	return key, nil
}
