package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

var sentinels = []error{ErrShort, ErrBadMagic, ErrVersion, ErrAuth, ErrUnknownType, ErrMalformed}

// FuzzUnmarshal checks that Unmarshal never panics, that every failure
// wraps one of the package's sentinel errors, and that whatever decodes
// re-encodes to the very same bytes (the encoding is canonical). It also
// decodes each input with a Codec that already decoded a message of every
// type, as the daemons' Codecs have: the result must be exactly the fresh
// one, so no field of an earlier message leaks into a later one.
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
	checkUsedCodec(t, data, m, err)
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

// checkUsedCodec decodes data with a Codec that holds a decoded message
// of every type and compares with what a fresh decode gave (want,
// wantErr); then it re-encodes the message with the same Codec.
func checkUsedCodec(t *testing.T, data []byte, want Message, wantErr error) {
	c := NewCodec(testKey)
	for _, m := range sampleMessages() {
		if _, err := c.Decode(mustMarshal(t, testKey, m)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Decode(data)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("a used Codec decodes with error %v, a fresh one with %v", err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a used Codec decodes\n %#v\na fresh one\n %#v", got, want)
	}
	if err != nil {
		return
	}
	again, err := c.Append(nil, got)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("the used Codec re-encodes to %x, %v:\n  in %x", again, err, data)
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
	return append(b, NewCodec(testKey).tag(b)...)
}
