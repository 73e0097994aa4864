package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// The control protocol against an attacker on the LAN who records
// datagrams and sends them again, reflects them back to their sender,
// or makes up his own. Issue 9: with the starting code one captured
// datagram verified forever, from any source, in either direction.

// TestAdversarialReplayedDatagrams: every message type, in the direction
// it travels, is accepted once and refused when it comes again, also
// after newer datagrams moved the window on.
func TestAdversarialReplayedDatagrams(t *testing.T) {
	fe, be := pair(t, 4, 1000, 2000)
	check := func(from, to *Codec, m Message) {
		t.Helper()
		first := mustAppend(t, from, m)
		if _, err := to.Decode(first); err != nil {
			t.Fatalf("%v: first delivery refused: %v", m.Type(), err)
		}
		if _, err := to.Decode(first); !errors.Is(err, ErrReplay) {
			t.Errorf("%v replayed at once: %v, want ErrReplay", m.Type(), err)
		}
		for range 3 {
			if _, err := to.Decode(mustAppend(t, from, m)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := to.Decode(first); !errors.Is(err, ErrReplay) {
			t.Errorf("%v replayed later: %v, want ErrReplay", m.Type(), err)
		}
	}
	for _, m := range toFrontend(4, 2000) {
		check(be, fe, m)
	}
	for _, m := range toBackend(4) {
		check(fe, be, m)
	}
	// Older than the window: refused though never seen.
	old := mustAppend(t, be, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 1})
	for range ReplayWindowSize {
		mustAppend(t, be, &Keepalive{BackendID: 4, Incarnation: 2000}) // sent, lost
	}
	if _, err := fe.Decode(mustAppend(t, be, &Keepalive{BackendID: 4, Incarnation: 2000})); err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Decode(old); !errors.Is(err, ErrReplay) {
		t.Errorf("a datagram a window behind: %v, want ErrReplay", err)
	}
}

// TestAdversarialOldIncarnation: once a back-end restarted (a newer
// incarnation registered), nothing its earlier run sent is accepted: an
// old Register cannot flap it back, an old Keepalive cannot pass for a
// sign of life. The same holds at the shim for the front-end's restart:
// an old Splice is dead.
func TestAdversarialOldIncarnation(t *testing.T) {
	fe, be1 := pair(t, 4, 1000, 2000)
	oldRegister := mustAppend(t, be1, &Register{BackendID: 4, IP: sampleIP, Incarnation: 2000})
	oldKeepalive := mustAppend(t, be1, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 1})
	for _, dg := range [][]byte{oldRegister, oldKeepalive} {
		if _, err := fe.Decode(dg); err != nil {
			t.Fatal(err)
		}
	}
	_, be2 := pair(t, 4, 0, 3000) // the back-end restarts
	if _, err := fe.Decode(mustAppend(t, be2, &Register{BackendID: 4, IP: sampleIP, Incarnation: 3000})); err != nil {
		t.Fatalf("the restarted back-end's Register: %v", err)
	}
	// Its earlier run's datagrams, even ones the front-end never saw.
	unseen := mustAppend(t, be1, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 2})
	for _, dg := range [][]byte{oldRegister, oldKeepalive, unseen} {
		if _, err := fe.Decode(dg); !errors.Is(err, ErrStale) {
			t.Errorf("datagram of the earlier incarnation: %v, want ErrStale", err)
		}
	}

	fe1, be := pair(t, 4, 1000, 2000)
	oldSplice := mustAppend(t, fe1, withBackend(goldenSplice(), 4))
	fe2, _ := pair(t, 4, 1001, 0) // the front-end restarts
	if _, err := be.Decode(mustAppend(t, fe2, &RegisterAck{BackendID: 4, Incarnation: 2000})); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Decode(oldSplice); !errors.Is(err, ErrStale) {
		t.Errorf("a Splice of the front-end's earlier run at the shim: %v, want ErrStale", err)
	}
}

var sampleIP = sampleMessages()[0].(*Register).IP

// TestAdversarialReflectedDatagrams: a datagram sent back to its sender
// is refused by direction, before its tag is even checked: the
// front-end's probe (a Keepalive) reflected to the front-end cannot pass
// for the back-end's answer, and a back-end's Close cannot pass for the
// front-end's.
func TestAdversarialReflectedDatagrams(t *testing.T) {
	fe, be := pair(t, 4, 1000, 2000)
	probe := mustAppend(t, fe, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 0})
	if _, err := fe.Decode(probe); !errors.Is(err, ErrDirection) {
		t.Errorf("the front-end's probe reflected to it: %v, want ErrDirection", err)
	}
	for _, m := range toBackend(4) {
		if _, err := fe.Decode(mustAppend(t, fe, m)); !errors.Is(err, ErrDirection) {
			t.Errorf("front-end's %v reflected: %v, want ErrDirection", m.Type(), err)
		}
	}
	for _, m := range toFrontend(4, 2000) {
		if _, err := be.Decode(mustAppend(t, be, m)); !errors.Is(err, ErrDirection) {
			t.Errorf("back-end's %v reflected: %v, want ErrDirection", m.Type(), err)
		}
	}
	// Turning the direction byte round breaks the tag.
	flipped := bytes.Clone(probe)
	flipped[4] = byte(ToFrontend)
	if _, err := fe.Decode(flipped); !errors.Is(err, ErrAuth) {
		t.Errorf("the probe with its direction turned: %v, want ErrAuth", err)
	}
}

// TestAdversarialRefusalsAllocateNothing: refusing each kind of bad
// datagram an attacker without a key can send costs no allocation, at
// the front-end (which derives the key of whichever back-end a datagram
// names) and at a shim; and each really was refused for its reason.
func TestAdversarialRefusalsAllocateNothing(t *testing.T) {
	fe, be := pair(t, 4, 1000, 2000)
	genuine := mustAppend(t, be, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 1})
	if _, err := fe.Decode(genuine); err != nil {
		t.Fatal(err)
	}
	fromFE := mustAppend(t, fe, &Keepalive{BackendID: 4, Incarnation: 2000, Seq: 1})
	if _, err := be.Decode(fromFE); err != nil {
		t.Fatal(err)
	}
	mutate := func(b []byte, f func([]byte)) []byte { c := bytes.Clone(b); f(c); return c }
	v2 := mutate(genuine, func(b []byte) { b[2] = 2 })
	badTag := mutate(genuine, func(b []byte) { b[len(b)-1] ^= 1 })
	unknownBackend := mutate(genuine, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 77) })
	k4, _ := DeriveKey(testMaster, 4)
	stale, _ := Marshal(k4, Header{Direction: ToFrontend, Incarnation: 1999, Seq: 9}, &Keepalive{BackendID: 4})
	for _, tc := range []struct {
		name string
		c    *Codec
		dg   []byte
		want error
	}{
		{"empty", fe, nil, ErrShort},
		{"short", fe, genuine[:20], ErrShort},
		{"bad magic", fe, mutate(genuine, func(b []byte) { b[0] = 'X' }), ErrBadMagic},
		{"version 2", fe, v2, ErrVersion},
		{"length past the end", fe, mutate(genuine, func(b []byte) { b[6] = 0xff }), ErrShort},
		{"reflected", fe, fromFE, ErrDirection},
		{"back-end 0", fe, mutate(genuine, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0) }), ErrPeer},
		{"bad tag, known back-end", fe, badTag, ErrAuth},
		{"bad tag, unknown back-end", fe, unknownBackend, ErrAuth},
		{"replayed", fe, genuine, ErrReplay},
		{"older incarnation", fe, stale, ErrStale},
		{"for another back-end, at a shim", be, mutate(fromFE, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 5) }), ErrPeer},
		{"bad tag, at a shim", be, mutate(fromFE, func(b []byte) { b[30] ^= 1 }), ErrAuth},
		{"replayed, at a shim", be, fromFE, ErrReplay},
	} {
		var err error
		if n := testing.AllocsPerRun(100, func() { _, err = tc.c.Decode(tc.dg) }); n != 0 {
			t.Errorf("%s: %v allocations", tc.name, n)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Forged ids cost the front-end no memory either: no peer state.
	if len(fe.peers) != 1 {
		t.Errorf("front-end keeps state for %d back-ends, want 1", len(fe.peers))
	}
}
