// Package wireshark holds the tests of the Wireshark dissector of the
// control protocol, qsplice.lua: they encode datagrams with package proto,
// write them into a pcapng capture with splice/link, and compare what
// tshark, running the dissector, shows with what was encoded.
package wireshark

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/link"
)

// Tshark returns the path of tshark, failing the test when it is missing
// on CI (.ci/run installs it) and skipping it elsewhere.
func Tshark(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tshark not installed, and CI=true: .ci/run installs it")
		}
		t.Skip("tshark not installed")
	}
	return p
}

// Script is the dissector's path, absolute.
func Script(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs("qsplice.lua")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// datagram is one control datagram of the test capture and what went
// into it.
type datagram struct {
	h proto.Header
	m proto.Message
	b []byte
}

var (
	frontAddr = netip.MustParseAddrPort("198.18.0.2:7400")
	backAddr  = netip.MustParseAddrPort("198.18.0.22:7401")
)

// testMessages are every message type with every field set to a value
// that no other field has, so a field shown in another's place is seen.
func testMessages() []datagram {
	mac := func(b byte) [6]byte { return [6]byte{0x02, b, 0xa1, 0xb2, 0xc3, 0xd4} }
	ip := netip.MustParseAddr
	return []datagram{
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 11},
			m: &proto.Register{BackendID: 7, IP: ip("198.18.0.22"), MAC: mac(1), ControlPort: 7401,
				WebPorts: []uint16{80, 8080, 8443}, Capacity: 513, Incarnation: 1764619200123456789}},
		{h: proto.Header{Direction: proto.ToBackend, Incarnation: 1764619100000000001, Seq: 12},
			m: &proto.RegisterAck{BackendID: 7, Incarnation: 1764619200123456789, KeepaliveInterval: 1500 * time.Millisecond}},
		{h: proto.Header{Direction: proto.ToBackend, Incarnation: 1764619100000000001, Seq: 13},
			m: &proto.Splice{RequestID: 0xdeadbeef00000021, Customer: 4242,
				ClientIP: ip("198.18.1.10"), ClientPort: 40001, VIP: ip("198.18.0.100"), VIPPort: 80,
				HandoffIP: ip("198.18.0.3"), HandoffPort: 50002, BackendIP: ip("198.18.0.22"), BackendPort: 8080,
				SeqDelta: 0x89abcdef, TSOffset: 0x12345678,
				Flags:         proto.SpliceTimestamps | proto.SpliceWindowScale | proto.SpliceRewrite | proto.SpliceAtSYN | proto.SpliceRequest,
				WScaleBackend: 7, WScaleFrontend: 9, ClientNextHopMAC: mac(2), RequestEnd: 0xfedcba98, BackendID: 7,
				RewriteStart: 0xfedcba00, RewriteEnd: 0xfedcba40, RequestOffset: 0x11,
				RequestWindow: 0x1f5, RequestTSVal: 0x0c0ffee5, Request: []byte("GET /carried HTTP/1.1\r\nHost: h\r\n\r\n")}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 14},
			m: &proto.SpliceAck{RequestID: 0xdeadbeef00000021, BackendID: 7, OK: true, Reason: ""}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 15},
			m: &proto.SpliceAck{RequestID: 0xdeadbeef00000022, BackendID: 7, OK: false, Reason: "no such port: 8081"}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 16},
			m: &proto.Feedback{BackendID: 7, RequestID: 0xdeadbeef00000021, ServiceTime: 3*time.Millisecond + 17,
				ResponseBytes: 1 << 40, Concurrency: 31, ResponseEnd: 0x0badf00d, FirstByte: 2*time.Millisecond + 9}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 17},
			m: &proto.Keepalive{BackendID: 7, Incarnation: 1764619200123456789, Seq: 99, Concurrency: 5}},
		{h: proto.Header{Direction: proto.ToBackend, Incarnation: 1764619100000000001, Seq: 18},
			m: &proto.Keepalive{BackendID: 7, Incarnation: 1764619200123456789, Seq: 100, Concurrency: 6}},
		{h: proto.Header{Direction: proto.ToBackend, Incarnation: 1764619100000000001, Seq: 19},
			m: &proto.Close{RequestID: 0xdeadbeef00000021, BackendID: 7, Reason: proto.CloseRST}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 20},
			m: &proto.Close{RequestID: 0xdeadbeef00000023, BackendID: 7, Reason: proto.CloseBackendDead}},
		// A Splice that moves a pooled C2 (its extensions), and Feedbacks
		// with their last byte, with and without FirstByte.
		{h: proto.Header{Direction: proto.ToBackend, Incarnation: 1764619100000000001, Seq: 21},
			m: &proto.Splice{RequestID: 0xdeadbeef00000024, ClientIP: ip("198.18.1.11"), ClientPort: 40002,
				VIP: ip("198.18.0.100"), VIPPort: 80, HandoffIP: ip("198.18.0.3"), HandoffPort: 50002,
				BackendIP: ip("198.18.0.22"), BackendPort: 8080, SeqDelta: 5, TSOffset: 6,
				Flags: proto.SpliceTimestamps | proto.SpliceSACK, ClientNextHopMAC: mac(3), RequestEnd: 0x1000, BackendID: 7,
				Reuse:          proto.SpliceReuse{On: true, ServerNext: 0xabcdef01, FrontNext: 0xfc0, ClientDelta: 0x80000001, ClientTSOffset: 77, Early: true},
				CloseResponses: true}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 22},
			m: &proto.Feedback{BackendID: 7, RequestID: 0xdeadbeef00000024, ServiceTime: 17, ResponseEnd: 9,
				FirstByte: 5, CloseSent: true, FINSent: true}},
		{h: proto.Header{Direction: proto.ToFrontend, Incarnation: 1764619200123456789, Seq: 23},
			m: &proto.Feedback{BackendID: 7, RequestID: 0xdeadbeef00000025, ServiceTime: 17, ResponseEnd: 9, CloseSent: true}},
	}
}

// snake is the dissector's filter name of a Go field name (qsplice.lua's
// snake): RequestID -> request_id, VIPPort -> vip_port.
func snake(name string) string {
	var b strings.Builder
	r := []rune(name)
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// fieldText is how tshark -T fields prints v, a field of a message.
func fieldText(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case netip.Addr:
		return x.String()
	case [6]byte:
		parts := make([]string, 6)
		for i, c := range x {
			parts[i] = fmt.Sprintf("%02x", c)
		}
		return strings.Join(parts, ":")
	case []uint16:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = strconv.Itoa(int(p))
		}
		return strings.Join(parts, ",")
	case []byte:
		return hex.EncodeToString(x)
	case string:
		return x
	case bool:
		if x {
			return "1"
		}
		return "0"
	case time.Duration:
		return strconv.FormatInt(int64(x), 10)
	}
	switch v.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	}
	panic(fmt.Sprintf("no text for %v (%T)", v, v.Interface()))
}

// expectedFields are the dissector's fields of d and their values as
// tshark prints them: every field of the header and of the message,
// found by reflection, so a field proto gains and the dissector does not
// show fails the test.
func expectedFields(d datagram) map[string]string {
	want := map[string]string{
		"qsplice.magic":       "QS",
		"qsplice.version":     strconv.Itoa(proto.Version),
		"qsplice.type":        strconv.Itoa(int(d.m.Type())),
		"qsplice.direction":   strconv.Itoa(int(d.h.Direction)),
		"qsplice.reserved":    "0x00",
		"qsplice.length":      strconv.Itoa(len(d.b) - 28 - 16),
		"qsplice.backend":     strconv.FormatUint(uint64(proto.BackendOf(d.m)), 10),
		"qsplice.incarnation": strconv.FormatUint(d.h.Incarnation, 10),
		"qsplice.seq":         strconv.FormatUint(d.h.Seq, 10),
		"qsplice.tag":         hex.EncodeToString(d.b[len(d.b)-16:]),
		"qsplice.backend_id":  strconv.FormatUint(uint64(proto.BackendOf(d.m)), 10),
	}
	v := reflect.ValueOf(d.m).Elem()
	msg := strings.ToLower(v.Type().Name())
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		abbr := "qsplice." + msg + "." + snake(name)
		fv := v.Field(i)
		switch {
		case name == "Reason" && fv.Kind() == reflect.String:
			want[abbr+"_len"] = strconv.Itoa(fv.Len())
			if fv.Len() == 0 {
				want[abbr] = "" // no item for an empty reason
				continue
			}
		case name == "WebPorts":
			want[abbr+"_count"] = strconv.Itoa(fv.Len())
		case name == "Request":
			want[abbr+"_len"] = strconv.Itoa(fv.Len())
		case name == "Flags":
			want[abbr] = fmt.Sprintf("0x%02x", fv.Uint())
			continue
		case name == "RequestID":
			want["qsplice.request_id"] = fieldText(fv)
		case name == "Reuse":
			// Extension 1 (and 3 for Early), only for a reused C2.
			r := fv.Interface().(proto.SpliceReuse)
			for sub, v := range map[string]uint32{"server_next": r.ServerNext, "front_next": r.FrontNext,
				"client_delta": r.ClientDelta, "client_ts_offset": r.ClientTSOffset} {
				want["qsplice.splice.reuse_"+sub] = onWire(r.On, strconv.FormatUint(uint64(v), 10))
			}
			want["qsplice.splice.reuse_early"] = onWire(r.Early, "1")
			continue
		case name == "CloseResponses", name == "CloseSent":
			want[abbr] = onWire(fv.Bool(), "1")
			continue
		case name == "FINSent":
			want[abbr] = onWire(v.FieldByName("CloseSent").Bool(), fieldText(fv))
			continue
		}
		want[abbr] = fieldText(fv)
	}
	// Fields a message leaves off the wire: tshark shows nothing of them.
	switch m := d.m.(type) {
	case *proto.Splice:
		if m.Flags&proto.SpliceRewrite == 0 {
			for _, k := range []string{"rewrite_start", "rewrite_end", "request_offset"} {
				want["qsplice.splice."+k] = ""
			}
		}
		if m.Flags&proto.SpliceRequest == 0 {
			for _, k := range []string{"request_window", "request_ts_val", "request", "request_len"} {
				want["qsplice.splice."+k] = ""
			}
		}
	case *proto.Feedback:
		if m.FirstByte == 0 {
			want["qsplice.feedback.first_byte"] = ""
		}
	}
	if _, ok := want["qsplice.request_id"]; !ok {
		want["qsplice.request_id"] = ""
	}
	return want
}

// writeCapture writes ds into a pcapng file: those on the control
// interface between the front-end's control port and a shim's, and, when
// onLink, again as Ethernet frames on the link interface between other
// ports (the heuristic must find those).
func writeCapture(t *testing.T, path string, ds []datagram, extra [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := link.NewPcapngWriter(f, link.CaptureInterfaces("eth-test")...)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1764619200, 0)
	clock := func() time.Time { at = at.Add(time.Millisecond); return at }
	rec := w.ControlRecorder(1, clock)
	for _, d := range ds {
		if d.h.Direction == proto.ToBackend {
			rec.RecordDatagram(d.b, frontAddr, backAddr, link.Outbound)
		} else {
			rec.RecordDatagram(d.b, backAddr, frontAddr, link.Inbound)
		}
	}
	for _, b := range extra {
		rec.RecordDatagram(b, frontAddr, backAddr, link.Outbound)
	}
	// The same datagrams on the link, as Ethernet frames between ports
	// the dissector is not registered for.
	for _, d := range ds {
		pkt, err := link.UDPPacket(netip.MustParseAddrPort("198.18.0.2:17400"), netip.MustParseAddrPort("198.18.0.22:17401"), d.b)
		if err != nil {
			t.Fatal(err)
		}
		eth := append([]byte{0x02, 0, 0, 0, 0, 0x22, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00}, pkt...)
		if err := w.WritePacket(0, clock(), eth, link.Outbound, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
}

func encode(t *testing.T, ds []datagram) {
	t.Helper()
	master := bytes.Repeat([]byte{0x5a}, proto.KeyLen)
	for i := range ds {
		key, err := proto.DeriveKey(master, proto.BackendOf(ds[i].m))
		if err != nil {
			t.Fatal(err)
		}
		if ds[i].b, err = proto.Marshal(key, ds[i].h, ds[i].m); err != nil {
			t.Fatalf("%T: %v", ds[i].m, err)
		}
		// The capture must hold what the daemons accept.
		if _, _, err := proto.Unmarshal(key, ds[i].b); err != nil {
			t.Fatalf("%T does not decode: %v", ds[i].m, err)
		}
	}
}

// runTshark runs tshark with the dissector over path with args and
// returns its standard output; a Lua error fails the test.
func runTshark(t *testing.T, path string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Tshark(t), append([]string{"-X", "lua_script:" + Script(t), "-r", path}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "Lua") || strings.Contains(line, "lua") || strings.Contains(line, "rror") {
			t.Fatalf("tshark complains: %s", stderr.String())
		}
	}
	if strings.Contains(stdout.String(), "Lua Error") {
		t.Fatalf("the dissector failed:\n%s", stdout.String())
	}
	return stdout.String()
}

// DissectedFields runs tshark with the dissector on path, showing only
// qsplice frames (filter, "" for "qsplice"), and returns per frame
// the value of each of fields (several occurrences joined by ",").
func DissectedFields(t *testing.T, path, filter string, fields []string) []map[string]string {
	t.Helper()
	if filter == "" {
		filter = "qsplice"
	}
	args := []string{"-Y", filter, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out := runTshark(t, path, args...)
	var frames []map[string]string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != len(fields) {
			t.Fatalf("tshark printed %d columns, want %d: %q", len(cols), len(fields), line)
		}
		m := make(map[string]string, len(fields))
		for i, f := range fields {
			m[f] = cols[i]
		}
		frames = append(frames, m)
	}
	return frames
}

func sortedKeys(ds []datagram) []string {
	seen := map[string]bool{}
	var keys []string
	for _, d := range ds {
		for k := range expectedFields(d) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	// Stable order: the test's output reads the same every run.
	slices.Sort(keys)
	return keys
}

func TestDissectorShowsEveryFieldOfEveryMessage(t *testing.T) {
	ds := testMessages()
	encode(t, ds)
	types := map[proto.Type]bool{}
	for _, d := range ds {
		types[d.m.Type()] = true
	}
	for typ := proto.TypeRegister; typ <= proto.TypeClose; typ++ {
		if !types[typ] {
			t.Fatalf("the test sends no %v", typ)
		}
	}
	path := filepath.Join(t.TempDir(), "control.pcapng")
	writeCapture(t, path, ds, nil)
	fields := append([]string{"frame.interface_id", "udp.srcport"}, sortedKeys(ds)...)

	frames := DissectedFields(t, path, "", fields)
	if len(frames) != 2*len(ds) {
		t.Fatalf("tshark shows %d qsplice frames, want %d (each datagram on the control port and on the link)", len(frames), 2*len(ds))
	}
	for i, got := range frames {
		d := ds[i%len(ds)]
		where := fmt.Sprintf("frame %d (%v, interface %s, port %s)", i+1, d.m.Type(), got["frame.interface_id"], got["udp.srcport"])
		want := expectedFields(d)
		for _, f := range fields[2:] {
			if w, ok := want[f]; ok && got[f] != w {
				t.Errorf("%s: %s = %q, encoded %q", where, f, got[f], w)
			} else if !ok && got[f] != "" {
				t.Errorf("%s: %s = %q, belongs to another message type", where, f, got[f])
			}
		}
	}
}

func TestDissectorSaysTheTagIsNotVerified(t *testing.T) {
	ds := testMessages()
	encode(t, ds)
	path := filepath.Join(t.TempDir(), "control.pcapng")
	writeCapture(t, path, ds[:1], nil)
	out := runTshark(t, path, "-Y", "qsplice", "-V")
	for _, want := range []string{"tag not verified", "Version: 3", "Type: Register (1)", "Direction: to-frontend (2)",
		"WebPorts: 8443"} {
		if !strings.Contains(out, want) {
			t.Errorf("tshark -V does not show %q:\n%s", want, out)
		}
	}
}

// TestDissectorShowsUnknownVersionsTypesAndDamage feeds the dissector
// what it cannot decode: it must say what it is, and not fail.
func TestDissectorShowsUnknownVersionsTypesAndDamage(t *testing.T) {
	ds := testMessages()
	encode(t, ds)
	splice := ds[2].b
	otherVersion := bytes.Clone(splice)
	otherVersion[2] = 9
	unknownType := bytes.Clone(splice)
	unknownType[3] = 42
	truncated := bytes.Clone(splice[:40]) // header and 12 body bytes, length says 61
	shortBody := bytes.Clone(ds[6].b)     // Keepalive with its length cut by 2: a field is missing
	shortBody[7] -= 2
	shortBody = append(shortBody[:28+20], shortBody[len(shortBody)-16:]...)
	badEnums := bytes.Clone(ds[8].b) // Close with reason 9
	badEnums[28+12] = 9
	extra := [][]byte{otherVersion, unknownType, truncated, shortBody, badEnums}
	path := filepath.Join(t.TempDir(), "damaged.pcapng")
	writeCapture(t, path, nil, extra)

	fields := []string{"qsplice.version", "qsplice.type", "qsplice.undecoded", "qsplice.body", "qsplice.tag",
		"qsplice.keepalive.concurrency", "qsplice.close.reason", "_ws.expert.message"}
	frames := DissectedFields(t, path, "", fields)
	if len(frames) != len(extra) {
		t.Fatalf("tshark shows %d qsplice frames, want %d", len(frames), len(extra))
	}
	check := func(i int, field, want string) {
		t.Helper()
		if got := frames[i][field]; !strings.Contains(got, want) || (want == "" && got != "") {
			t.Errorf("frame %d: %s = %q, want %q", i+1, field, got, want)
		}
	}
	check(0, "qsplice.version", "9")
	check(0, "qsplice.undecoded", hex.EncodeToString(otherVersion[3:]))
	check(0, "_ws.expert.message", "version 9")
	check(1, "qsplice.type", "42")
	check(1, "qsplice.body", hex.EncodeToString(unknownType[28:28+61]))
	check(1, "_ws.expert.message", "message type 42")
	check(1, "qsplice.tag", hex.EncodeToString(unknownType[len(unknownType)-16:]))
	check(2, "_ws.expert.message", "the datagram holds 40")
	check(3, "_ws.expert.message", "Concurrency truncated")
	check(3, "qsplice.keepalive.concurrency", "")
	check(4, "qsplice.close.reason", "9")
	check(4, "_ws.expert.message", "unknown close reason")
}

// TestDissectorSurvivesDamagedDatagrams: datagrams of every type cut
// short, lengthened, with bytes flipped and lengths lied about, on the
// control port: tshark must dissect each as qsplice without a Lua error
// (a Lua error in a dissector shows in the tree, not as a failure).
func TestDissectorSurvivesDamagedDatagrams(t *testing.T) {
	ds := testMessages()
	encode(t, ds)
	rng := rand.New(rand.NewPCG(11, 3))
	var damaged [][]byte
	for range 300 {
		b := bytes.Clone(ds[rng.IntN(len(ds))].b)
		switch rng.IntN(5) {
		case 0: // cut anywhere past the magic
			b = b[:2+rng.IntN(len(b)-2)]
		case 1: // bytes after the tag
			b = append(b, make([]byte, 1+rng.IntN(40))...)
		case 2: // the body length lies
			binary.BigEndian.PutUint16(b[6:], uint16(rng.IntN(200)))
		case 3: // a byte of the body or header changes (not the magic)
			b[2+rng.IntN(len(b)-2)] ^= byte(1 + rng.IntN(255))
		case 4: // an unknown version or type
			b[2+rng.IntN(2)] = byte(rng.IntN(256))
		}
		damaged = append(damaged, b)
	}
	path := filepath.Join(t.TempDir(), "damaged.pcapng")
	writeCapture(t, path, nil, damaged)
	out := runTshark(t, path, "-Y", "qsplice", "-T", "fields", "-e", "qsplice.magic")
	if n := strings.Count(out, "QS"); n != len(damaged) {
		t.Fatalf("tshark shows %d of %d damaged datagrams as qsplice", n, len(damaged))
	}
	// runTshark failed the test on a Lua error; -V shows them too.
	if v := runTshark(t, path, "-Y", "qsplice", "-V"); strings.Contains(v, "Lua Error") {
		t.Fatal("the dissector failed on a damaged datagram")
	}
}

// TestDissectorDecodeAsAndPortPreference: on a port of its own choosing
// a datagram the heuristic does not take (another version) is dissected
// once the user says so, with Decode As or the port preference.
func TestDissectorDecodeAsAndPortPreference(t *testing.T) {
	ds := testMessages()
	encode(t, ds)
	b := bytes.Clone(ds[0].b)
	b[2] = 4 // a version to come: the heuristic leaves it alone
	path := filepath.Join(t.TempDir(), "port.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := link.NewPcapngWriter(f, link.CaptureInterfaces("eth-test")...)
	if err != nil {
		t.Fatal(err)
	}
	w.ControlRecorder(1, time.Now).RecordDatagram(b, netip.MustParseAddrPort("198.18.0.22:9001"),
		netip.MustParseAddrPort("198.18.0.2:9000"), link.Inbound)
	f.Close()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"by default", nil, ""},
		{"Decode As", []string{"-d", "udp.port==9000,qsplice"}, "4"},
		{"port preference", []string{"-o", "qsplice.port:9000"}, "4"},
	} {
		out := runTshark(t, path, append(c.args, "-T", "fields", "-e", "qsplice.version")...)
		if got := strings.TrimSpace(out); got != c.want {
			t.Errorf("%s: qsplice.version %q, want %q", c.name, got, c.want)
		}
	}
}

// onWire is v when the field is on the wire, and "" (tshark shows
// nothing) when it is not.
func onWire(present bool, v string) string {
	if present {
		return v
	}
	return ""
}
