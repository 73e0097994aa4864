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

	"github.com/qsplice/qsplice/splice/wire"
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

// Without a VIP, replay takes the destination of the first SYN to a
// listening port: a capture made against another address replays as
// well as one against the default.
func TestVIPLearnedFromTheFirstSYN(t *testing.T) {
	other := host{mac: vip.mac, ip: wire.IP4{198, 18, 0, 77}, port: 80}
	b := newCaptureBuilder(t)
	b.arpWhoHas(0, client1, other.ip) // before the SYN: kept and fed
	b.seg(10, client1, other, 100, 0, fSYN, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(110, other, client1, 900, 101, fSYN|fACK, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(200, client1, other, 101, 901, fACK, nil, nil)
	b.seg(300, client1, other, 101, 901, fACK|fPSH, nil, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	_, s := replay(t, Config{}, b.buf.Bytes())
	if s.VIP != "198.18.0.77" || s.HandedOver != 1 || s.ARPReplies != 1 {
		var text bytes.Buffer
		s.WriteText(&text)
		t.Fatalf("want the VIP learned, the ARP answered and the request handed over; got\n%s", text.String())
	}
	// No SYN to a listening port: nothing to learn from.
	if _, err := Run(Config{Ports: []uint16{8080}}, bytes.NewReader(b.buf.Bytes()), io.Discard); !errors.Is(err, ErrNoVIP) {
		t.Errorf("no SYN to port 8080: %v, want ErrNoVIP", err)
	}
}
