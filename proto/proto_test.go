package proto

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

var testKey = []byte("qsplice test key, 32 bytes long!")

// sampleMessages returns one message of every type with field values that
// use every byte of their fields, so a swapped or shortened field shows.
func sampleMessages() []Message {
	return []Message{
		&Register{
			BackendID:   0xa1b2c3d4,
			IP:          netip.MustParseAddr("198.18.3.7"),
			MAC:         [6]byte{0x02, 0x00, 0x5e, 0x10, 0x20, 0x30},
			ControlPort: 7001,
			WebPorts:    []uint16{80, 443, 8080, 65535},
			Capacity:    512,
			Incarnation: 0x0102030405060708,
		},
		&RegisterAck{BackendID: 3, Incarnation: math.MaxUint64, KeepaliveInterval: 250 * time.Millisecond},
		goldenSplice(),
		&SpliceAck{RequestID: 1 << 63, BackendID: 9, OK: false, Reason: "no such port: 8081 ✗"},
		&Feedback{BackendID: 4, RequestID: 0xdeadbeefcafe, ServiceTime: 20*time.Millisecond + 17*time.Microsecond, ResponseBytes: 1 << 40, Concurrency: 5, ResponseEnd: 0xfffffff0},
		&Keepalive{BackendID: 77, Incarnation: 1234567890123, Seq: 42, Concurrency: 65535},
		&Close{RequestID: 99, BackendID: 2, Reason: CloseBackendDead},
	}
}

// goldenSplice is the Splice message pinned by TestGoldenSplice.
func goldenSplice() *Splice {
	return &Splice{
		RequestID:        0x1122334455667788,
		Customer:         0xc0ffee,
		ClientIP:         netip.MustParseAddr("198.18.0.10"),
		ClientPort:       51234,
		VIP:              netip.MustParseAddr("198.18.1.1"),
		VIPPort:          80,
		HandoffIP:        netip.MustParseAddr("198.18.2.1"),
		HandoffPort:      40001,
		BackendIP:        netip.MustParseAddr("198.18.2.11"),
		BackendPort:      8080,
		SeqDelta:         0xfffffff0,
		TSOffset:         0x80000001,
		Flags:            SpliceTimestamps | SpliceSACK | SpliceWindowScale,
		WScaleBackend:    7,
		WScaleFrontend:   14,
		ClientNextHopMAC: [6]byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee},
		RequestEnd:       0x00000100,
		BackendID:        0x0a0b0c0d,
	}
}

// testHeader is the header tests seal sample messages with: the
// direction each type usually travels in, a fixed incarnation, and
// sequence number 1.
func testHeader(m Message) Header {
	dir := ToFrontend
	switch m.Type() {
	case TypeRegisterAck, TypeSplice:
		dir = ToBackend
	}
	h := Header{Direction: dir, Incarnation: 0x1122334455667788, Seq: 1}
	// A back-end's Register and Keepalive name its incarnation.
	switch m := m.(type) {
	case *Register:
		h.Incarnation = m.Incarnation
	case *Keepalive:
		h.Incarnation = m.Incarnation
	}
	return h
}

// seal builds a datagram by hand, independently of Append, so tests can
// present well-authenticated but otherwise arbitrary bodies and headers.
// The header is testHeader's for typ, naming back-end be.
func seal(key []byte, version, typ, dir, reserved uint8, be uint32, body []byte) []byte {
	b := []byte{'Q', 'S', version, typ, dir, reserved, 0, 0}
	binary.BigEndian.PutUint16(b[6:], uint16(len(body)))
	b = binary.BigEndian.AppendUint32(b, be)
	b = binary.BigEndian.AppendUint64(b, 0x1122334455667788)
	b = binary.BigEndian.AppendUint64(b, 1)
	b = append(b, body...)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return append(b, mac.Sum(nil)[:16]...)
}

func mustMarshal(t testing.TB, key []byte, m Message) []byte {
	t.Helper()
	b, err := Marshal(key, testHeader(m), m)
	if err != nil {
		t.Fatalf("Marshal(%T): %v", m, err)
	}
	return b
}

// unmarshal is Unmarshal without the header.
func unmarshal(key, b []byte) (Message, error) {
	_, m, err := Unmarshal(key, b)
	return m, err
}

func TestRoundTrip(t *testing.T) {
	for _, key := range [][]byte{testKey, nil} {
		for _, m := range sampleMessages() {
			b := mustMarshal(t, key, m)
			if len(b) > MaxDatagram {
				t.Errorf("%v: %d bytes, more than MaxDatagram", m.Type(), len(b))
			}
			if Type(b[3]) != m.Type() {
				t.Errorf("%v: header type byte %d", m.Type(), b[3])
			}
			got, err := unmarshal(key, b)
			if err != nil {
				t.Fatalf("Unmarshal(%v) with key %q: %v", m.Type(), key, err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("round trip %v:\n got %+v\nwant %+v", m.Type(), got, m)
			}
		}
	}
}

func TestRoundTripEdgeValues(t *testing.T) {
	ports := make([]uint16, MaxWebPorts)
	for i := range ports {
		ports[i] = uint16(1000 + i)
	}
	long := string(bytes.Repeat([]byte{'r'}, MaxReasonLen))
	for _, m := range []Message{
		&Register{IP: netip.IPv4Unspecified(), WebPorts: ports},
		&Register{IP: netip.MustParseAddr("255.255.255.255")}, // no ports: decodes as nil
		&RegisterAck{KeepaliveInterval: time.Duration(math.MaxInt64)},
		&SpliceAck{OK: true, Reason: long},
		&SpliceAck{},
		&Splice{ClientIP: netip.IPv4Unspecified(), VIP: netip.IPv4Unspecified(),
			HandoffIP: netip.IPv4Unspecified(), BackendIP: netip.IPv4Unspecified()},
		&Close{Reason: CloseFIN},
	} {
		got, err := unmarshal(testKey, mustMarshal(t, testKey, m))
		if err != nil {
			t.Fatalf("%v: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip %v:\n got %+v\nwant %+v", m.Type(), got, m)
		}
	}
}

// TestGoldenSplice pins the wire format: a change here breaks every
// deployed peer, so it must come with a Version bump.
func TestGoldenSplice(t *testing.T) {
	const want = "515303030100003d" + // magic, version 3, type 3, to back-end, reserved, length 61
		"0a0b0c0d" + "1122334455667788" + "0000000000000001" + // back-end, incarnation, seq
		"1122334455667788" + "00c0ffee" + // RequestID, Customer
		"c612000a" + "c822" + "c6120101" + "0050" + // client 4-tuple
		"c6120201" + "9c41" + "c612020b" + "1f90" + // C2 4-tuple
		"fffffff0" + "80000001" + "07" + "07" + "0e" + // deltas, flags, window scales
		"02aabbccddee" + "00000100" + "0a0b0c0d" + // next-hop MAC, RequestEnd, BackendID
		goldenSpliceTag
	got := hex.EncodeToString(mustMarshal(t, testKey, goldenSplice()))
	if got != want {
		t.Fatalf("golden Splice encoding changed:\n got %s\nwant %s", got, want)
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	prefix := []byte("prefix")
	b, err := Append(bytes.Clone(prefix), testKey, testHeader(goldenSplice()), goldenSplice())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("Append lost the prefix: %q", b[:len(prefix)])
	}
	if want := mustMarshal(t, testKey, goldenSplice()); !bytes.Equal(b[len(prefix):], want) {
		t.Fatalf("Append after a prefix encodes differently from Marshal")
	}
}

func TestTypeAndReasonStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{TypeRegister.String(), "Register"},
		{TypeClose.String(), "Close"},
		{Type(0).String(), "Type(0)"},
		{Type(200).String(), "Type(200)"},
		{CloseFIN.String(), "FIN"},
		{CloseRST.String(), "RST"},
		{CloseTimeout.String(), "timeout"},
		{CloseBackendDead.String(), "backend-dead"},
		{CloseReason(9).String(), "CloseReason(9)"},
	} {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestUnmarshalDoesNotAlias(t *testing.T) {
	b := mustMarshal(t, testKey, &SpliceAck{RequestID: 1, Reason: "busy"})
	m, err := unmarshal(testKey, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if r := m.(*SpliceAck).Reason; r != "busy" {
		t.Fatalf("Reason changed with the input buffer: %q", r)
	}
}

// goldenSpliceTag is the tag of TestGoldenSplice's datagram, computed
// with Python's hmac module from the hex bytes, independently of this
// package.
const goldenSpliceTag = "efe507affdfbe982c1846b8e196f2ed0"
