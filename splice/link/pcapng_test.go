package link

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ngRecord is one record of a pcapng capture as read back.
type ngRecord struct {
	iface   int
	t       time.Time
	data    string
	inbound bool
	comment string
}

func readPcapng(t *testing.T, b []byte) ([]pcapgo.NgInterface, []ngRecord) {
	t.Helper()
	r, err := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []ngRecord
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if opts.Flags == nil {
			t.Fatalf("record %d has no direction", len(recs))
		}
		recs = append(recs, ngRecord{ci.InterfaceIndex, ci.Timestamp, string(data),
			opts.Flags.Direction == pcapgo.NgEpbFlagDirectionInbound, strings.Join(opts.Comments, "|")})
	}
	var ifaces []pcapgo.NgInterface
	for i := range r.NInterfaces() {
		intf, err := r.Interface(i)
		if err != nil {
			t.Fatal(err)
		}
		ifaces = append(ifaces, intf)
	}
	return ifaces, recs
}

// TestPcapngRecorderAndControlShareOneFile: a Recorder's frames go to
// the link's interface, a control socket's datagrams to the control
// interface as IPv4/UDP packets, in the order written, with their times
// to the nanosecond.
func TestPcapngRecorderAndControlShareOneFile(t *testing.T) {
	var file bytes.Buffer
	w, err := NewPcapngWriter(&file, CaptureInterfaces("veth-fe")...)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Unix(1700000000, 123456789)
	clock := func() time.Time { tick = tick.Add(time.Microsecond + 1); return tick }
	a, b := NewMemPair(4)
	defer b.Close()
	notes := func(frame []byte, inbound bool) string {
		if inbound {
			return ""
		}
		return "wrote " + string(frame)
	}
	rec := NewRecorder(a, w.Interface(0, notes), clock)
	defer rec.Close()
	ctl := w.ControlRecorder(1, clock)

	if err := rec.WriteFrame([]byte("frame out")); err != nil {
		t.Fatal(err)
	}
	from, to := netip.MustParseAddrPort("198.18.0.22:7401"), netip.MustParseAddrPort("198.18.0.2:7400")
	ctl.RecordDatagram([]byte("datagram in"), from, to, Inbound)
	b.WriteFrame([]byte("frame in"))
	buf := make([]byte, 64)
	if _, err := rec.ReadFrame(buf); err != nil {
		t.Fatal(err)
	}
	ctl.RecordDatagram([]byte("datagram out"), to, from, Outbound)
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Err(); err != nil {
		t.Fatal(err)
	}

	ifaces, recs := readPcapng(t, file.Bytes())
	if len(ifaces) != 2 || ifaces[0].Name != "veth-fe" || ifaces[0].LinkType != layers.LinkTypeEthernet ||
		ifaces[1].Name != "control" || ifaces[1].LinkType != layers.LinkTypeRaw {
		t.Fatalf("interfaces %+v, want veth-fe (Ethernet) and control (raw IP)", ifaces)
	}
	udpIn, _ := UDPPacket(from, to, []byte("datagram in"))
	udpOut, _ := UDPPacket(to, from, []byte("datagram out"))
	want := []ngRecord{
		{0, time.Time{}, "frame out", Outbound, "wrote frame out"},
		{1, time.Time{}, string(udpIn), Inbound, ""},
		{0, time.Time{}, "frame in", Inbound, ""},
		{1, time.Time{}, string(udpOut), Outbound, ""},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	at := time.Unix(1700000000, 123456789)
	for i, w := range want {
		at = at.Add(time.Microsecond + 1)
		w.t = at
		if r := recs[i]; r.iface != w.iface || r.data != w.data || !r.t.Equal(at) || r.inbound != w.inbound || r.comment != w.comment {
			t.Errorf("record %d: %+v\nwant %+v", i, r, w)
		}
	}
}

// TestPcapngDirectionsAndCommentsReadInTshark: the records' directions
// (pcapng epb_flags) and comments are what Wireshark shows.
func TestPcapngDirectionsAndCommentsReadInTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark not installed, and CI=true: .ci/run installs it")
		}
		t.Skip("tshark not installed")
	}
	path := filepath.Join(t.TempDir(), "dir.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewPcapngWriter(f, CaptureInterfaces("veth-fe")...)
	if err != nil {
		t.Fatal(err)
	}
	frame := testFrame(broadcastMAC, "tshark")
	at := time.Unix(1700000000, 0)
	if err := w.WritePacket(0, at, frame, Inbound, "cookie issued"); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(0, at, frame, Outbound, ""); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(2, at, frame, Outbound, ""); err == nil {
		t.Error("a record for an interface the file does not have was written")
	}
	f.Close()
	out, err := exec.Command(tshark, "-r", path, "-T", "fields", "-e", "frame.interface_name",
		"-e", "frame.packet_flags_direction", "-e", "frame.comment").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"veth-fe\t0x00000001\tcookie issued", "veth-fe\t0x00000002"} // inbound, outbound
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tshark read %q, want %q", got, want)
	}
}

// TestUDPPacketChecksums: the packets a control datagram is written as
// carry correct IPv4 and UDP checksums, so Wireshark flags nothing.
func TestUDPPacketChecksums(t *testing.T) {
	from, to := netip.MustParseAddrPort("198.18.0.2:7400"), netip.MustParseAddrPort("198.18.0.21:7401")
	for _, payload := range [][]byte{nil, []byte("odd"), bytes.Repeat([]byte{0xff}, 1024)} {
		p, err := UDPPacket(from, to, payload)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 28+len(payload) || p[0] != 0x45 || p[9] != 17 || !bytes.Equal(p[28:], payload) {
			t.Fatalf("packet % x", p[:28])
		}
		if s := onesSum(p[:20]); s != 0xffff {
			t.Errorf("IPv4 header sums to %#x, want 0xffff", s)
		}
		udpLen := len(p) - 20
		pseudo := append(append([]byte{}, p[12:20]...), 0, 17, byte(udpLen>>8), byte(udpLen))
		if s := onesSum(append(pseudo, p[20:]...)); s != 0xffff {
			t.Errorf("UDP datagram of %d bytes sums to %#x, want 0xffff", len(payload), s)
		}
		if binary.BigEndian.Uint16(p[20:]) != 7400 || binary.BigEndian.Uint16(p[22:]) != 7401 {
			t.Errorf("ports % x", p[20:24])
		}
	}
	if _, err := UDPPacket(netip.MustParseAddrPort("[2001:db8::1]:1"), to, nil); err == nil {
		t.Error("an IPv6 address was written as IPv4")
	}
}

func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// TestCreateCaptureFormatByExtension: .pcapng makes pcapng (section
// header block first), anything else classic pcap with nanoseconds.
func TestCreateCaptureFormatByExtension(t *testing.T) {
	dir := t.TempDir()
	for name, magic := range map[string][]byte{
		"a.pcapng": {0x0a, 0x0d, 0x0d, 0x0a},
		"a.pcap":   {0x4d, 0x3c, 0xb2, 0xa1},
		"a.cap":    {0x4d, 0x3c, 0xb2, 0xa1},
	} {
		path := filepath.Join(dir, name)
		c, err := CreateCapture(path, "eth0", time.Now)
		if err != nil {
			t.Fatal(err)
		}
		a, b := NewMemPair(1)
		rec := c.Record(a)
		if err := rec.WriteFrame([]byte("frame")); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		a.Close()
		b.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, magic) || !bytes.Contains(got, []byte("frame")) {
			t.Errorf("%s starts % x, want % x, and holds the frame", name, got[:4], magic)
		}
	}
	if _, err := CreateCapture(filepath.Join(dir, "no", "such.pcapng"), "eth0", time.Now); err == nil {
		t.Error("a capture in a missing directory was created")
	}
}

// datagramLog is a ControlRecorder that keeps what it is told.
type datagramLog []string

func (l *datagramLog) RecordDatagram(b []byte, from, to netip.AddrPort, inbound bool) {
	*l = append(*l, fmt.Sprintf("%s %v->%v in=%v", b, from, to, inbound))
}

// TestControlSocketRecordsWhatItSendsAndReceives: a recording socket
// reports each datagram the kernel took, with both addresses, and each
// it received; not one the kernel refused.
func TestControlSocketRecordsWhatItSendsAndReceives(t *testing.T) {
	a, b := controlPair(t, ControlConfig{MaxDatagram: 64, Batch: 8})
	var sent, got datagramLog
	a.Record(&sent)
	b.Record(&got)
	nowhere := netip.MustParseAddrPort("203.0.113.1:9") // no route in the test's namespace
	for i := range 6 {
		to := b.LocalAddr()
		if i == 2 {
			to = nowhere
		}
		if err := a.Queue([]byte(fmt.Sprintf("d%d", i)), to); err != nil {
			t.Fatal(err)
		}
	}
	if failed, _ := a.Flush(); failed != 1 {
		t.Fatalf("Flush: %d refused, want the one to %v", failed, nowhere)
	}
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(b.FD(), 1); err != nil {
		t.Fatal(err)
	}
	received := 0
	for received < 5 {
		waitControl(t, p, 1)
		n, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		received += n
	}
	var wantSent, wantGot datagramLog
	for _, i := range []int{0, 1, 3, 4, 5} {
		d := fmt.Sprintf("d%d %v->%v", i, a.LocalAddr(), b.LocalAddr())
		wantSent = append(wantSent, d+" in=false")
		wantGot = append(wantGot, d+" in=true")
	}
	if strings.Join(sent, "|") != strings.Join(wantSent, "|") {
		t.Errorf("recorded as sent:\n%q\nwant\n%q", sent, wantSent)
	}
	if strings.Join(got, "|") != strings.Join(wantGot, "|") {
		t.Errorf("recorded as received:\n%q\nwant\n%q", got, wantGot)
	}
	a.Record(nil)
	a.Queue([]byte("unrecorded"), b.LocalAddr())
	a.Flush()
	if len(sent) != 5 {
		t.Errorf("recorded after Record(nil) (5 before): %q", sent)
	}
}
