package proto

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"reflect"
	"testing"
)

// goldenDatagrams are sampleMessages encoded with testKey, recorded before
// the Codec existed: the wire format must not move (a change needs a
// Version bump). Splice's tag was checked with Python's hmac
// (TestGoldenSplice).
var goldenDatagrams = map[Type]string{
	TypeRegister:    "5153020100000023a1b2c3d4c612030702005e1020301b590200010203040506070804005001bb1f90fffff7edcc8b5ead6e49b869e7c8a53bdd53",
	TypeRegisterAck: "515302020000001400000003ffffffffffffffff000000000ee6b280d70a023c7044dc3442786463e9374ef5",
	TypeSplice:      "5153020300000039112233445566778800c0ffeec612000ac822c61201010050c61202019c41c612020b1f90fffffff08000000107070e02aabbccddee00000100343f41f592a1e31175765885acea08d6",
	TypeSpliceAck:   "515302040000002480000000000000000000000900166e6f207375636820706f72743a203830383120e29c9724efdbcf099641d628ba44df209cb3ad",
	TypeFeedback:    "5153020500000022000000040000deadbeefcafe0000000001316f6800000100000000000005fffffff01fca28044edf99fd51016c7507eb037f",
	TypeKeepalive:   "51530206000000160000004d0000011f71fb04cb000000000000002affff6e5b5426881201e455e8fd5c8c84527a",
	TypeClose:       "515302070000000d000000000000006300000002047a9055a231afc157db6613c551c084fc",
}

// TestGoldenDatagrams pins every message type, through the one-shot
// Marshal and through one Codec reused for all of them, and decodes each
// golden datagram back to its message both ways.
func TestGoldenDatagrams(t *testing.T) {
	c := NewCodec(testKey)
	buf := make([]byte, 0, MaxDatagram)
	for _, m := range sampleMessages() {
		want := goldenDatagrams[m.Type()]
		if got := hex.EncodeToString(mustMarshal(t, testKey, m)); got != want {
			t.Errorf("%v: Marshal encodes\n %s\nwant\n %s", m.Type(), got, want)
		}
		b, err := c.Append(buf[:0], m)
		if err != nil {
			t.Fatalf("%v: Codec.Append: %v", m.Type(), err)
		}
		if got := hex.EncodeToString(b); got != want {
			t.Errorf("%v: Codec.Append encodes\n %s\nwant\n %s", m.Type(), got, want)
		}
		golden, _ := hex.DecodeString(want)
		got, err := c.Decode(golden)
		if err != nil {
			t.Fatalf("%v: Codec.Decode of the golden datagram: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: Codec.Decode\n got %+v\nwant %+v", m.Type(), got, m)
		}
		if got, err := Unmarshal(testKey, golden); err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("%v: Unmarshal = %+v, %v", m.Type(), got, err)
		}
	}
}

// TestCodecAllocatesNothing: encoding and decoding each message type with
// a warm Codec allocates nothing (the daemons do both per request), and
// the measured calls really produced the datagram and the message.
func TestCodecAllocatesNothing(t *testing.T) {
	c := NewCodec(testKey)
	buf := make([]byte, 0, MaxDatagram)
	for _, m := range sampleMessages() {
		want, _ := hex.DecodeString(goldenDatagrams[m.Type()])
		var enc []byte
		var encErr error
		if n := testing.AllocsPerRun(100, func() { enc, encErr = c.Append(buf[:0], m) }); n != 0 {
			t.Errorf("%v: Codec.Append: %v allocations", m.Type(), n)
		}
		if encErr != nil || !bytes.Equal(enc, want) {
			t.Fatalf("%v: Codec.Append = %x, %v; want %x", m.Type(), enc, encErr, want)
		}
		var dec Message
		var decErr error
		if n := testing.AllocsPerRun(100, func() { dec, decErr = c.Decode(want) }); n != 0 {
			t.Errorf("%v: Codec.Decode: %v allocations", m.Type(), n)
		}
		if decErr != nil || !reflect.DeepEqual(dec, m) {
			t.Fatalf("%v: Codec.Decode = %+v, %v; want %+v", m.Type(), dec, decErr, m)
		}
	}
}

// TestCodecMessageLifetime: a decoded message is the Codec's, refilled by
// the next Decode of its type; nothing of an earlier message survives in
// a later one.
func TestCodecMessageLifetime(t *testing.T) {
	c := NewCodec(testKey)
	decode := func(m Message) Message {
		t.Helper()
		got, err := c.Decode(mustMarshal(t, testKey, m))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	withPorts := decode(&Register{BackendID: 1, IP: netip.MustParseAddr("198.18.0.21"), WebPorts: []uint16{80, 8080}}).(*Register)
	ports := withPorts.WebPorts
	noPorts := decode(&Register{BackendID: 2, IP: netip.MustParseAddr("198.18.0.22")}).(*Register)
	if noPorts != withPorts {
		t.Errorf("two Registers decoded into different messages: the Codec does not reuse them")
	}
	if noPorts.BackendID != 2 || noPorts.WebPorts != nil {
		t.Errorf("second Register decoded as %+v: the first one's fields leaked", noPorts)
	}
	decode(&Register{BackendID: 3, IP: netip.MustParseAddr("198.18.0.23"), WebPorts: []uint16{443, 9}})
	if ports[0] != 443 {
		t.Errorf("WebPorts of an earlier Register are %v: not the Codec's storage, so the documented lifetime is wrong", ports)
	}

	refused := decode(&SpliceAck{RequestID: 1, Reason: "busy"}).(*SpliceAck)
	reason := refused.Reason
	if ok := decode(&SpliceAck{RequestID: 2, OK: true}).(*SpliceAck); ok.Reason != "" || !ok.OK {
		t.Errorf("second SpliceAck decoded as %+v", ok)
	}
	if reason != "busy" {
		t.Errorf("a kept Reason changed to %q", reason)
	}
}

// The handoff's messages (Splice out, SpliceAck and Feedback in) through
// a warm Codec and through the one-shot functions.
func BenchmarkSplice(b *testing.B) {
	m := goldenSplice()
	dg := mustMarshal(b, testKey, m)
	b.Run("Codec.Append", func(b *testing.B) {
		c, buf := NewCodec(testKey), make([]byte, 0, MaxDatagram)
		for b.Loop() {
			c.Append(buf[:0], m)
		}
	})
	b.Run("Marshal", func(b *testing.B) {
		for b.Loop() {
			Marshal(testKey, m)
		}
	})
	b.Run("Codec.Decode", func(b *testing.B) {
		c := NewCodec(testKey)
		for b.Loop() {
			c.Decode(dg)
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		for b.Loop() {
			Unmarshal(testKey, dg)
		}
	})
}
