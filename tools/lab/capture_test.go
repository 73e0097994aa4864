package lab

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/qsplice/qsplice/tools/netns"
)

func TestCaptureRecordsBothDirections(t *testing.T) {
	requireRoot(t)
	l := upLab(t, topologyConfig(t))
	file := filepath.Join(t.TempDir(), "c1.pcap")
	start := time.Now()
	stop, err := l.StartCapture("c1", file)
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(l, "c1", FrontendAddr); err != nil {
		stop()
		t.Fatal(err)
	}
	frames, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := stop(); again != frames || err != nil {
		t.Fatalf("second stop = %d, %v; want %d, nil", again, err, frames)
	}

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type = %v", r.LinkType())
	}
	if r.Resolution() != gopacket.TimestampResolutionNanosecond {
		t.Fatalf("timestamp resolution = %v, want nanoseconds", r.Resolution())
	}
	var read int
	var request, reply bool
	client, fe := l.ClientAddr(1).AsSlice(), net.ParseIP(FrontendAddr).To4()
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		read++
		if ci.Timestamp.Before(start.Add(-time.Second)) || ci.Timestamp.After(time.Now()) {
			t.Errorf("frame %d timestamp %v outside the capture", read, ci.Timestamp)
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if ip == nil || icmp == nil {
			continue
		}
		switch icmp.TypeCode.Type() {
		case layers.ICMPv4TypeEchoRequest:
			request = request || (ip.SrcIP.Equal(client) && ip.DstIP.Equal(fe))
		case layers.ICMPv4TypeEchoReply:
			reply = reply || (ip.SrcIP.Equal(fe) && ip.DstIP.Equal(client))
		}
	}
	if read != frames {
		t.Errorf("file holds %d frames, stop reported %d", read, frames)
	}
	if !request || !reply {
		t.Errorf("echo request seen %v, reply seen %v; want both directions", request, reply)
	}
}

func TestCaptureStopsAtCount(t *testing.T) {
	requireRoot(t)
	l := upLab(t, topologyConfig(t))
	file := filepath.Join(t.TempDir(), "fe.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		frames int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		n, err := l.Capture(ctx, "fe", file, 1)
		done <- result{n, err}
	}()
	// Until the capture socket exists, pings go unrecorded; keep pinging
	// until the capture has its frame. Each ping is a real round trip.
	for {
		select {
		case res := <-done:
			if res.err != nil || res.frames != 1 {
				t.Fatalf("Capture = %d, %v; want 1, nil", res.frames, res.err)
			}
			if ctx.Err() != nil {
				t.Fatal("Capture ran into its deadline instead of stopping at the count")
			}
			return
		default:
		}
		if err := ping(l, "c1", FrontendAddr); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCaptureRejectsUnknownLink(t *testing.T) {
	requireRoot(t)
	l := upLab(t, topologyConfig(t))
	file := filepath.Join(t.TempDir(), "x.pcap")
	for _, host := range []string{"b9", "sw", "br0"} {
		if stop, err := l.StartCapture(host, file); err == nil {
			stop()
			t.Errorf("StartCapture(%q) succeeded", host)
		}
	}
}

// The back-end kernel owns tap0's address but must never speak on eth0:
// only the shim may. Without it running, ARP for the back-end goes
// unanswered and nothing leaves b1's port towards the switch.
func TestBackendKernelSilentOnWire(t *testing.T) {
	requireRoot(t)
	l := upLab(t, topologyConfig(t))
	file := filepath.Join(t.TempDir(), "b1.pcap")
	stop, err := l.StartCapture("b1", file)
	if err != nil {
		t.Fatal(err)
	}
	if err := pingWithin(l, "c1", l.BackendAddr(1).String(), time.Second); err == nil {
		stop()
		t.Fatal("back-end answered a ping without its shim")
	}
	frames, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if frames == 0 {
		t.Fatal("captured nothing: the client's ARP requests should pass the port")
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var eth0MAC net.HardwareAddr
	if err := netns.Do(l.NS("b1"), func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err == nil {
			eth0MAC = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth.SrcMAC.String() == eth0MAC.String() || eth.SrcMAC.String() == l.BackendMAC(1).String() {
			t.Errorf("back-end sent a frame onto the wire: %v", p)
		}
	}
}
