package backend

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/qsplice/qsplice/splice/link"
)

// TestCapturePcapngHoldsWireFramesAndControlDatagrams: a .pcapng capture
// has the wire's frames with their direction on interface 0 and the
// control socket's datagrams as IPv4/UDP on interface 1; any other name
// stays classic pcap.
func TestCapturePcapngHoldsWireFramesAndControlDatagrams(t *testing.T) {
	dir := t.TempDir()
	c, err := openCapture(filepath.Join(dir, "b1.pcapng"), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := link.NewControlSocket(conn, link.ControlConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.recordControl(s)
	c.record([]byte("frame read"), link.Inbound)
	c.record([]byte("frame written"), link.Outbound)
	if err := s.Queue([]byte("to self"), s.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if failed, err := s.Flush(); failed != 0 || err != nil {
		t.Fatal(failed, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(dir, "b1.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		iface   int
		inbound bool
		tail    string
	}
	var got []rec
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tail := string(data[max(0, len(data)-len("to self")):])
		if ci.InterfaceIndex == 0 {
			tail = string(data)
		}
		got = append(got, rec{ci.InterfaceIndex, opts.Flags.Direction == pcapgo.NgEpbFlagDirectionInbound, tail})
	}
	want := []rec{{0, true, "frame read"}, {0, false, "frame written"}, {1, false, "to self"}}
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if intf, err := r.Interface(1); err != nil || intf.LinkType != layers.LinkTypeRaw || intf.Name != "control" {
		t.Errorf("interface 1: %+v, %v", intf, err)
	}

	pc, err := openCapture(filepath.Join(dir, "b1.pcap"), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	pc.record([]byte("frame"), link.Inbound)
	pc.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "b1.pcap"))
	if !bytes.HasPrefix(b, []byte{0x4d, 0x3c, 0xb2, 0xa1}) {
		t.Errorf("b1.pcap starts % x, not classic pcap with nanoseconds", b[:4])
	}
}
