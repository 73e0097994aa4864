package replay

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// toPcapng rewrites a pcap capture as pcapng.
func toPcapng(t *testing.T, capture []byte, lt layers.LinkType) []byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = lt
	intf.TimestampResolution = 9 // nanoseconds, as the pcap has
	w, err := pcapgo.NewNgWriterInterface(&out, intf, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: len(data), Length: len(data)}, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A pcapng capture replays exactly as the same frames in pcap.
func TestPcapngInput(t *testing.T) {
	in := threeClients(t)
	fromPcap, _ := replay(t, Config{}, in)
	fromNg, _ := replay(t, Config{}, toPcapng(t, in, layers.LinkTypeEthernet))
	if !bytes.Equal(fromPcap, fromNg) {
		t.Error("the pcapng form of the capture replays differently from the pcap form")
	}
}

// Captures whose frames are not Ethernet are refused, a cooked one
// (tcpdump -i any) by name, in pcap and pcapng alike.
func TestNonEthernetCapturesRefused(t *testing.T) {
	var sll bytes.Buffer
	w := pcapgo.NewWriter(&sll)
	if err := w.WriteFileHeader(65535, layers.LinkTypeLinuxSLL); err != nil {
		t.Fatal(err)
	}
	ngSLL := toPcapng(t, threeClients(t), layers.LinkTypeLinuxSLL)
	var raw bytes.Buffer
	w = pcapgo.NewWriter(&raw)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		capture []byte
		want    string
		cooked  bool
	}{
		{"pcap cooked", sll.Bytes(), "tcpdump -i any", true},
		{"pcapng cooked", ngSLL, "tcpdump -i any", true},
		{"pcap raw IP", raw.Bytes(), "only Ethernet", false},
		{"not a capture", []byte("hello, world"), "neither pcap nor pcapng", false},
		{"empty", nil, "not a capture", false},
	} {
		_, err := Run(Config{}, bytes.NewReader(tc.capture), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrCookedCapture) != tc.cooked {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
