package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

var sentinels = []error{ErrShort, ErrBadMagic, ErrVersion, ErrDirection, ErrPeer, ErrAuth, ErrStale, ErrReplay,
	ErrUnknownType, ErrMalformed}

// FuzzUnmarshal checks that Unmarshal never panics, that every failure
// wraps one of the package's sentinel errors, and that whatever decodes
// re-encodes, with the header it came with, to the very same bytes (the
// encoding is canonical). It also decodes each input with a Codec that
// already decoded a message of every type, as the daemons' Codecs have:
// the result must be exactly the fresh one, so no field of an earlier
// message leaks into a later one.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(mustMarshal(f, testKey, m))
	}
	f.Add(mustMarshal(f, testKey, reuseSplice()))
	closing := reuseSplice()
	closing.CloseResponses = true
	f.Add(mustMarshal(f, testKey, closing))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCanonical(t, data)
		// Random bytes practically never carry a valid tag, which would
		// leave the body parsers unexplored; so also try the input as
		// header and body, with magic, version, length and tag made right.
		if resealed := reseal(testKey, data); resealed != nil {
			checkCanonical(t, resealed)
		}
	})
}

func checkSentinel(t *testing.T, err error) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error %v wraps none of the sentinel errors", err)
}

func checkCanonical(t *testing.T, data []byte) {
	h, m, err := Unmarshal(testKey, data)
	checkUsedCodec(t, data, m, err)
	if err != nil {
		checkSentinel(t, err)
		return
	}
	again, err := Marshal(testKey, h, m)
	if err != nil {
		t.Fatalf("decoded %#v but cannot re-encode it: %v", m, err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs:\n  in %x\n out %x", data, again)
	}
}

// checkUsedCodec decodes data with a raw Codec that holds a decoded
// message of every type and compares with what a fresh decode gave
// (want, wantErr).
func checkUsedCodec(t *testing.T, data []byte, want Message, wantErr error) {
	c := newRawCodec(testKey)
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
}

// reseal treats data as header and body, fixes magic, version and body
// length, and appends a valid tag for key. It keeps the type, direction,
// reserved byte, back-end, incarnation and sequence number, so the fuzzer
// still steers those.
func reseal(key, data []byte) []byte {
	if len(data) < headerLen || len(data)-headerLen > 0xffff {
		return nil
	}
	b := bytes.Clone(data)
	b[0], b[1], b[2] = magic0, magic1, Version
	binary.BigEndian.PutUint16(b[6:], uint16(len(b)-headerLen))
	c := newRawCodec(key)
	return append(b, c.m.mac(&c.key, b, nil)[:tagLen]...)
}

// FuzzCodecReceive feeds the front-end's and a back-end's Codec
// arbitrary datagrams, and the same resealed with the key of the
// back-end they name: neither panics, every refusal wraps a sentinel
// error and allocates nothing, and a datagram accepted once is refused
// when it comes again.
func FuzzCodecReceive(f *testing.F) {
	fe, be := pair(f, 5, 10, 20)
	for _, m := range toFrontend(5, 20) {
		f.Add(mustAppend(f, be, m))
	}
	for _, m := range toBackend(5) {
		f.Add(mustAppend(f, fe, m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fe, be := pair(t, 5, 10, 20)
		try := func(c *Codec, dg []byte) {
			_, err := c.Decode(dg)
			if err != nil {
				checkSentinel(t, err)
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownType) {
					if n := testing.AllocsPerRun(1, func() { c.Decode(dg) }); n != 0 {
						t.Fatalf("refusing %x (%v) allocated %v times", dg, err, n)
					}
				}
				return
			}
			if _, err := c.Decode(dg); !errors.Is(err, ErrReplay) {
				t.Fatalf("an accepted datagram came again and got %v, want ErrReplay", err)
			}
		}
		for _, c := range []*Codec{fe, be} {
			try(c, data)
			if len(data) >= headerLen {
				key, _ := DeriveKey(testMaster, binary.BigEndian.Uint32(data[8:12]))
				if dg := reseal(key, data); dg != nil {
					try(c, dg)
				}
			}
		}
	})
}

// FuzzReplayWindow drives a ReplayWindow with a sequence of
// (incarnation, seq) datagrams and compares every answer with a model
// that remembers everything: the newest incarnation, and in it each
// sequence number accepted.
func FuzzReplayWindow(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 2, 0, 1})
	f.Add([]byte{1, 5, 0, 6, 1, 5, 2, 1, 1, 9})
	f.Add([]byte{0, 1, 0, 255, 0, 3, 0, 200, 0, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var w ReplayWindow
		var inc, top uint64
		seen := map[uint64]bool{}
		for i := 0; i+1 < len(ops); i += 2 {
			// Small incarnations; sequence numbers that jump by up to
			// 8 windows, so both sliding and falling out get exercised.
			in := uint64(ops[i] % 4)
			seq := uint64(ops[i+1]) * 9
			if ops[i]&0x80 != 0 {
				seq = top - uint64(ops[i+1])*5
			}
			var want error
			switch {
			case seq == 0:
				want = ErrReplay
			case top == 0 || in > inc:
				want = nil
			case in < inc:
				want = ErrStale
			case seq > top:
				want = nil
			case top-seq >= ReplayWindowSize || seen[seq]:
				want = ErrReplay
			}
			got := w.Check(in, seq)
			if got != want {
				t.Fatalf("op %d: Check(%d, %d) = %v, model says %v (window %d/%d)", i/2, in, seq, got, want, inc, top)
			}
			if got != nil {
				continue
			}
			w.Accept(in, seq)
			if top == 0 || in > inc {
				inc, top = in, seq
				seen = map[uint64]bool{}
			}
			top = max(top, seq)
			seen[seq] = true
			if w.Check(in, seq) == nil {
				t.Fatalf("op %d: (%d, %d) accepted and still not refused", i/2, in, seq)
			}
		}
	})
}
