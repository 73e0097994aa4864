package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// goldenDatagrams are sampleMessages sealed with testKey and testHeader:
// the wire format must not move (a change needs a Version bump). Splice's
// tag was checked with Python's hmac (TestGoldenSplice).
var goldenDatagrams = map[Type]string{
	TypeRegister:    "5153030102000023a1b2c3d401020304050607080000000000000001a1b2c3d4c612030702005e1020301b590200010203040506070804005001bb1f90ffff519c75085704eb8de19996de513bb2b1",
	TypeRegisterAck: "5153030201000014000000031122334455667788000000000000000100000003ffffffffffffffff000000000ee6b280410ba986fa403a15128040057c8467e2",
	TypeSplice:      "515303030100003d0a0b0c0d11223344556677880000000000000001112233445566778800c0ffeec612000ac822c61201010050c61202019c41c612020b1f90fffffff08000000107070e02aabbccddee000001000a0b0c0defe507affdfbe982c1846b8e196f2ed0",
	TypeSpliceAck:   "5153030402000024000000091122334455667788000000000000000180000000000000000000000900166e6f207375636820706f72743a203830383120e29c9797ccf976606003c504862067c661311f",
	TypeFeedback:    "51530305020000220000000411223344556677880000000000000001000000040000deadbeefcafe0000000001316f6800000100000000000005fffffff01942d599928305d4c44232bf9fc67fd1",
	TypeKeepalive:   "51530306020000160000004d0000011f71fb04cb00000000000000010000004d0000011f71fb04cb000000000000002affffc16cbd09e58bd0588459c5b2e7332537",
	TypeClose:       "515303070200000d0000000211223344556677880000000000000001000000000000006300000002041c4e8423fd55b94e9b7956eccaaf692f",
}

// TestGoldenDatagrams pins every message type and decodes each golden
// datagram back to its message and header.
func TestGoldenDatagrams(t *testing.T) {
	for _, m := range sampleMessages() {
		want := goldenDatagrams[m.Type()]
		if got := hex.EncodeToString(mustMarshal(t, testKey, m)); got != want {
			t.Errorf("%v: Marshal encodes\n %s\nwant\n %s", m.Type(), got, want)
		}
		golden, _ := hex.DecodeString(want)
		h, got, err := Unmarshal(testKey, golden)
		if err != nil {
			t.Fatalf("%v: Unmarshal of the golden datagram: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: Unmarshal\n got %+v\nwant %+v", m.Type(), got, m)
		}
		wantH := testHeader(m)
		wantH.Backend = BackendOf(m)
		if h != wantH {
			t.Errorf("%v: header %+v, want %+v", m.Type(), h, wantH)
		}
	}
}

// testMaster is the master key of the Codec tests.
var testMaster = []byte("master key of the qsplice tests, 40 bytes")

// pair returns a front-end Codec and back-end id's Codec that talk to
// each other.
func pair(t testing.TB, id uint32, feInc, beInc uint64) (fe, be *Codec) {
	t.Helper()
	fe, err := NewFrontEndCodec(testMaster, feInc)
	if err != nil {
		t.Fatal(err)
	}
	key, err := DeriveKey(testMaster, id)
	if err != nil {
		t.Fatal(err)
	}
	be, err = NewBackEndCodec(id, key, beInc)
	if err != nil {
		t.Fatal(err)
	}
	return fe, be
}

// withIncarnation sets the incarnation of a back-end's Register or
// Keepalive (which must be its Codec's).
func withIncarnation(m Message, inc uint64) Message {
	switch m := m.(type) {
	case *Register:
		m.Incarnation = inc
	case *Keepalive:
		m.Incarnation = inc
	}
	return m
}

// withBackend returns a copy of a sample message naming back-end id.
func withBackend(m Message, id uint32) Message {
	switch m := m.(type) {
	case *Register:
		c := *m
		c.BackendID = id
		return &c
	case *RegisterAck:
		c := *m
		c.BackendID = id
		return &c
	case *Splice:
		c := *m
		c.BackendID = id
		return &c
	case *SpliceAck:
		c := *m
		c.BackendID = id
		return &c
	case *Feedback:
		c := *m
		c.BackendID = id
		return &c
	case *Keepalive:
		c := *m
		c.BackendID = id
		return &c
	case *Close:
		c := *m
		c.BackendID = id
		return &c
	}
	panic("unknown message")
}

// toFrontend and toBackend are the sample messages each side sends;
// inc is the sending back-end's incarnation.
func toFrontend(id uint32, inc uint64) []Message {
	var ms []Message
	for _, m := range sampleMessages() {
		if testHeader(m).Direction == ToFrontend {
			ms = append(ms, withIncarnation(withBackend(m, id), inc))
		}
	}
	return ms
}

func toBackend(id uint32) []Message {
	var ms []Message
	for _, m := range sampleMessages() {
		switch m.Type() {
		case TypeRegisterAck, TypeSplice, TypeKeepalive, TypeClose:
			ms = append(ms, withBackend(m, id))
		}
	}
	return ms
}

func mustAppend(t testing.TB, c *Codec, m Message) []byte {
	t.Helper()
	b, err := c.Append(nil, m)
	if err != nil {
		t.Fatalf("Append(%v): %v", m.Type(), err)
	}
	return b
}

// TestCodecsTalk: every message each side sends decodes on the other,
// with the sender's header, sequence numbers counting from 1.
func TestCodecsTalk(t *testing.T) {
	fe, be := pair(t, 7, 100, 200)
	for i, m := range toFrontend(7, 200) {
		got, err := fe.Decode(mustAppend(t, be, m))
		if err != nil {
			t.Fatalf("front-end decoding %v: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("front-end decoded\n %+v\nwant %+v", got, m)
		}
		if h := fe.Header(); h != (Header{ToFrontend, 7, 200, uint64(i + 1)}) {
			t.Errorf("header %+v", h)
		}
	}
	for i, m := range toBackend(7) {
		got, err := be.Decode(mustAppend(t, fe, m))
		if err != nil {
			t.Fatalf("back-end decoding %v: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("back-end decoded\n %+v\nwant %+v", got, m)
		}
		if h := be.Header(); h != (Header{ToBackend, 7, 100, uint64(i + 1)}) {
			t.Errorf("header %+v", h)
		}
	}
}

// TestPerBackendKeys: a datagram sealed with back-end 3's key does not
// pass as back-end 4's, nor does a back-end's Codec accept what the
// front-end sealed for another back-end.
func TestPerBackendKeys(t *testing.T) {
	fe, be3 := pair(t, 3, 1, 1)
	k3, _ := DeriveKey(testMaster, 3)
	k4, _ := DeriveKey(testMaster, 4)
	if bytes.Equal(k3, k4) {
		t.Fatal("back-ends 3 and 4 have the same key")
	}
	// Back-end 3's key, claiming to be back-end 4.
	forged, err := Marshal(k3, Header{Direction: ToFrontend, Incarnation: 1, Seq: 1}, &Keepalive{BackendID: 4, Incarnation: 1, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Decode(forged); !errors.Is(err, ErrAuth) {
		t.Fatalf("back-end 3 speaking for 4: %v, want ErrAuth", err)
	}
	// The front-end's datagram for back-end 4 at back-end 3.
	_, be4 := pair(t, 4, 1, 1)
	_ = be4
	for4 := mustAppend(t, fe, &Keepalive{BackendID: 4})
	if _, err := be3.Decode(for4); !errors.Is(err, ErrPeer) {
		t.Fatalf("datagram for back-end 4 at back-end 3: %v, want ErrPeer", err)
	}
	// Relabelled for back-end 3 (header and body), the tag no longer fits.
	relabelled, _ := Marshal(k4, Header{Direction: ToBackend, Incarnation: 1, Seq: 2}, &Keepalive{BackendID: 3})
	if _, err := be3.Decode(relabelled); !errors.Is(err, ErrAuth) {
		t.Fatalf("back-end 4's key at back-end 3: %v, want ErrAuth", err)
	}
}

// TestCodecAllocatesNothing: sealing and opening each message type with
// warm Codecs allocates nothing (the daemons do both per request), and
// the measured calls really produced the datagram and the message.
func TestCodecAllocatesNothing(t *testing.T) {
	fe, be := pair(t, 9, 1, 1)
	buf := make([]byte, 0, MaxDatagram)
	check := func(from, to *Codec, m Message) {
		t.Helper()
		mustAppend(t, from, m) // the first datagram of a peer adds its state
		if _, err := to.Decode(mustAppend(t, from, m)); err != nil {
			t.Fatal(err)
		}
		var enc []byte
		var encErr error
		if n := testing.AllocsPerRun(100, func() { enc, encErr = from.Append(buf[:0], m) }); n != 0 {
			t.Errorf("%v: Codec.Append: %v allocations", m.Type(), n)
		}
		if encErr != nil || len(enc) == 0 {
			t.Fatalf("%v: Codec.Append = %x, %v", m.Type(), enc, encErr)
		}
		// Fresh datagrams to decode: each is accepted once.
		dgs := make([][]byte, 101)
		for i := range dgs {
			dgs[i] = mustAppend(t, from, m)
		}
		i := 0
		var dec Message
		var decErr error
		if n := testing.AllocsPerRun(100, func() { dec, decErr = to.Decode(dgs[i]); i++ }); n != 0 {
			t.Errorf("%v: Codec.Decode: %v allocations", m.Type(), n)
		}
		if decErr != nil || !reflect.DeepEqual(dec, m) {
			t.Fatalf("%v: Codec.Decode = %+v, %v; want %+v", m.Type(), dec, decErr, m)
		}
	}
	for _, m := range toFrontend(9, 1) {
		check(be, fe, m)
	}
	for _, m := range toBackend(9) {
		check(fe, be, m)
	}
}

// TestCodecMessageLifetime: a decoded message is the Codec's, refilled by
// the next Decode of its type; nothing of an earlier message survives in
// a later one.
func TestCodecMessageLifetime(t *testing.T) {
	fe, be := pair(t, 1, 1, 1)
	decode := func(m Message) Message {
		t.Helper()
		got, err := fe.Decode(mustAppend(t, be, m))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	withPorts := decode(&Register{BackendID: 1, Incarnation: 1, IP: netip.MustParseAddr("198.18.0.21"), WebPorts: []uint16{80, 8080}}).(*Register)
	ports := withPorts.WebPorts
	noPorts := decode(&Register{BackendID: 1, Incarnation: 1, IP: netip.MustParseAddr("198.18.0.22")}).(*Register)
	if noPorts != withPorts {
		t.Errorf("two Registers decoded into different messages: the Codec does not reuse them")
	}
	if noPorts.IP != netip.MustParseAddr("198.18.0.22") || noPorts.WebPorts != nil {
		t.Errorf("second Register decoded as %+v: the first one's fields leaked", noPorts)
	}
	decode(&Register{BackendID: 1, Incarnation: 1, IP: netip.MustParseAddr("198.18.0.23"), WebPorts: []uint16{443, 9}})
	if ports[0] != 443 {
		t.Errorf("WebPorts of an earlier Register are %v: not the Codec's storage, so the documented lifetime is wrong", ports)
	}

	refused := decode(&SpliceAck{BackendID: 1, RequestID: 1, Reason: "busy"}).(*SpliceAck)
	reason := refused.Reason
	if ok := decode(&SpliceAck{BackendID: 1, RequestID: 2, OK: true}).(*SpliceAck); ok.Reason != "" || !ok.OK {
		t.Errorf("second SpliceAck decoded as %+v", ok)
	}
	if reason != "busy" {
		t.Errorf("a kept Reason changed to %q", reason)
	}
}

// The handoff's messages (Splice out, SpliceAck in) through warm Codecs.
func BenchmarkSplice(b *testing.B) {
	fe, be := pair(b, 3, 1, 1)
	m := withBackend(goldenSplice(), 3)
	buf := make([]byte, 0, MaxDatagram)
	// The back-end registered: the front-end keeps its prepared key.
	if _, err := fe.Decode(mustAppend(b, be, &Keepalive{BackendID: 3, Incarnation: 1})); err != nil {
		b.Fatal(err)
	}
	b.Run("Append", func(b *testing.B) {
		for b.Loop() {
			fe.Append(buf[:0], m)
		}
	})
	b.Run("Append+Decode", func(b *testing.B) {
		for b.Loop() {
			dg, _ := fe.Append(buf[:0], m)
			be.Decode(dg)
		}
	})
	forged := mustAppend(b, fe, m)
	forged[len(forged)-1] ^= 1
	b.Run("Decode forged", func(b *testing.B) {
		for b.Loop() {
			be.Decode(forged)
		}
	})
	// The front-end refusing a forged datagram naming a back-end it does
	// not know: it derives that back-end's key, then checks the tag.
	unknown := mustAppend(b, be, &Keepalive{BackendID: 3, Incarnation: 1})
	binary.BigEndian.PutUint32(unknown[8:], 77)
	b.Run("Decode forged unknown back-end", func(b *testing.B) {
		for b.Loop() {
			fe.Decode(unknown)
		}
	})
}
