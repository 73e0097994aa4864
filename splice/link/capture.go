package link

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// Capture is a daemon's capture file: classic pcap of its link's frames,
// or, for a path ending in ".pcapng", a pcapng file with the link as
// interface 0 (every socket a sharded daemon reads the device through
// records there) and the control socket's datagrams as IPv4/UDP packets
// on interface 1.
type Capture struct {
	f     *os.File
	clock func() time.Time
	frame FrameWriter
	ng    *PcapngWriter // nil for pcap
}

// Annotate makes the link's frames recorded from now on (Record) carry
// the comments notes gives them, in a pcapng capture; classic pcap has
// no room for comments.
func (c *Capture) Annotate(notes FrameNotes) {
	if c.ng != nil {
		c.frame = c.ng.Interface(0, notes)
	}
}

// CaptureInterfaces are the interfaces of a daemon's pcapng capture:
// linkName's frames (Ethernet) and the control datagrams (raw IPv4).
func CaptureInterfaces(linkName string) []PcapngInterface {
	return []PcapngInterface{
		{Name: linkName, Description: "qsplice link (client side and back-ends)", LinkType: layers.LinkTypeEthernet},
		{Name: "control", Description: "qsplice control datagrams (UDP)", LinkType: layers.LinkTypeRaw},
	}
}

// CreateCapture creates path (pcapng if it ends in ".pcapng", pcap
// otherwise) for the link named linkName; clock stamps the frames.
func CreateCapture(path, linkName string, clock func() time.Time) (*Capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	c := &Capture{f: f, clock: clock}
	if strings.HasSuffix(path, ".pcapng") {
		c.ng, err = NewPcapngWriter(f, CaptureInterfaces(linkName)...)
		if err == nil {
			c.frame = c.ng.Interface(0, nil)
		}
	} else {
		c.frame, err = NewPcapWriter(f)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Record wraps l so that its frames are captured.
func (c *Capture) Record(l Link) *Recorder { return NewRecorder(l, c.frame, c.clock) }

// RecordControl makes s's datagrams captured, in a pcapng capture; a
// pcap capture has no room for them (one link type per file) and leaves
// s alone.
func (c *Capture) RecordControl(s *ControlSocket) {
	if c.ng != nil {
		s.Record(c.ng.ControlRecorder(1, c.clock))
	}
}

// Close closes the file. Every record is already written (both writers
// write through).
func (c *Capture) Close() error { return c.f.Close() }
