package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

var sentinels = []error{ErrShort, ErrBadMagic, ErrVersion, ErrAuth, ErrUnknownType, ErrMalformed}

// FuzzUnmarshal checks that Unmarshal never panics, that every failure
// wraps one of the package's sentinel errors, and that whatever decodes
// re-encodes to the very same bytes (the encoding is canonical).
func FuzzUnmarshal(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(mustMarshal(f, testKey, m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCanonical(t, data)
		// Random bytes practically never carry a valid tag, which would
		// leave the body parsers unexplored; so also try the input as
		// header and body, with magic, version, length and tag made right.
		if resealed := reseal(data); resealed != nil {
			checkCanonical(t, resealed)
		}
	})
}

func checkCanonical(t *testing.T, data []byte) {
	m, err := Unmarshal(testKey, data)
	if err != nil {
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("error %v wraps none of the sentinel errors", err)
	}
	again, err := Marshal(testKey, m)
	if err != nil {
		t.Fatalf("decoded %#v but cannot re-encode it: %v", m, err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs:\n  in %x\n out %x", data, again)
	}
}

// reseal treats data as header and body, fixes magic, version and body
// length, and appends a valid tag. It keeps the type, flags and reserved
// bytes, so the fuzzer still steers those.
func reseal(data []byte) []byte {
	if len(data) < headerLen || len(data)-headerLen > 0xffff {
		return nil
	}
	b := bytes.Clone(data)
	b[0], b[1], b[2] = magic0, magic1, Version
	binary.BigEndian.PutUint16(b[6:], uint16(len(b)-headerLen))
	tag := computeTag(testKey, b)
	return append(b, tag[:]...)
}
