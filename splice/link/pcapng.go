package link

import (
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// A pcapng capture holds several interfaces in one file, each with its own
// link type, and marks every frame with its interface and direction: the
// front-end's link (client side and back-ends: one device, however many
// sockets its shards read it through) and its control socket (datagrams
// written as IPv4/UDP packets) in one file, in time order, which
// Wireshark opens as one trace. Classic pcap (PcapWriter) has one link
// type per file and no directions.

// PcapngInterface describes one interface of a pcapng capture.
type PcapngInterface struct {
	Name        string // e.g. the device name, "control"
	Description string
	// LinkType is layers.LinkTypeEthernet for a link's frames, or
	// layers.LinkTypeRaw for IP packets (the control datagrams).
	LinkType layers.LinkType
}

// PcapngWriter writes frames of several interfaces to one pcapng stream
// with nanosecond timestamps. It is safe for concurrent use: the shards'
// Recorders and the control socket's recorder share one.
//
// Every record is flushed to the underlying io.Writer when written (one
// write per frame, like PcapWriter), so a capture is whole up to its last
// frame even when the daemon is killed; it is a debugging aid, not a path
// for line-rate traffic.
type PcapngWriter struct {
	mu     sync.Mutex
	w      *pcapgo.NgWriter
	ifaces []PcapngInterface
}

// NewPcapngWriter writes the section header and one interface
// description block per interface (at least one; interface i is index i
// in the file) to w.
func NewPcapngWriter(w io.Writer, ifaces ...PcapngInterface) (*PcapngWriter, error) {
	if len(ifaces) == 0 {
		return nil, fmt.Errorf("pcapng: no interface")
	}
	opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware: pcapgo.DefaultNgWriterOptions.SectionInfo.Hardware,
		OS:       pcapgo.DefaultNgWriterOptions.SectionInfo.OS,
		// Not the version: captures of the same run by two builds
		// should read the same.
		Application: "qsplice",
	}}
	ng, err := pcapgo.NewNgWriterInterface(w, ngInterface(ifaces[0]), opts)
	if err != nil {
		return nil, fmt.Errorf("pcapng: write section header: %w", err)
	}
	for _, i := range ifaces[1:] {
		if _, err := ng.AddInterface(ngInterface(i)); err != nil {
			return nil, fmt.Errorf("pcapng: write interface %q: %w", i.Name, err)
		}
	}
	if err := ng.Flush(); err != nil {
		return nil, fmt.Errorf("pcapng: write header: %w", err)
	}
	return &PcapngWriter{w: ng, ifaces: append([]PcapngInterface(nil), ifaces...)}, nil
}

func ngInterface(i PcapngInterface) pcapgo.NgInterface {
	return pcapgo.NgInterface{
		Name:                i.Name,
		Description:         i.Description,
		LinkType:            i.LinkType,
		SnapLength:          PcapSnaplen,
		TimestampResolution: 9,
	}
}

// Direction of a frame in a pcapng record, as seen by the daemon.
const (
	Inbound  = true
	Outbound = false
)

// WritePacket appends one record of interface iface stamped t: inbound
// (read by the daemon) or outbound (written by it), with an optional
// comment (opt_comment; "" for none). The zero time is written as the
// Unix epoch, as PcapWriter does.
func (p *PcapngWriter) WritePacket(iface int, t time.Time, frame []byte, inbound bool, comment string) error {
	if iface < 0 || iface >= len(p.ifaces) {
		return fmt.Errorf("pcapng: no interface %d (have %d)", iface, len(p.ifaces))
	}
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	captured := frame
	if len(captured) > PcapSnaplen {
		captured = captured[:PcapSnaplen]
	}
	ci := gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(captured), Length: len(frame), InterfaceIndex: iface}
	flags := pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionOutbound}
	if inbound {
		flags.Direction = pcapgo.NgEpbFlagDirectionInbound
	}
	opts := pcapgo.NgPacketOptions{Flags: &flags}
	if comment != "" {
		opts.Comments = []string{comment}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.w.WritePacketWithOptions(ci, captured, opts); err != nil {
		return fmt.Errorf("pcapng: write frame: %w", err)
	}
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("pcapng: write frame: %w", err)
	}
	return nil
}

// Interface returns a FrameWriter for interface iface, for a Recorder:
// every frame of a link read through the Recorder goes to iface,
// marked inbound or outbound, with the comment notes gives it (notes
// may be nil).
func (p *PcapngWriter) Interface(iface int, notes FrameNotes) *PcapngInterfaceWriter {
	return &PcapngInterfaceWriter{p: p, iface: iface, notes: notes}
}

// PcapngInterfaceWriter writes the frames of one interface of a
// PcapngWriter. Safe for concurrent use if its FrameNotes is.
type PcapngInterfaceWriter struct {
	p     *PcapngWriter
	iface int
	notes FrameNotes
}

var _ directedFrameWriter = (*PcapngInterfaceWriter)(nil)

// WriteFrame writes frame stamped t, with no direction known: as
// outbound. Recorders call WriteFrameDir.
func (w *PcapngInterfaceWriter) WriteFrame(t time.Time, frame []byte) error {
	return w.WriteFrameDir(t, frame, Outbound)
}

// WriteFrameDir writes frame stamped t, read (inbound) or written by the
// daemon.
func (w *PcapngInterfaceWriter) WriteFrameDir(t time.Time, frame []byte, inbound bool) error {
	var note string
	if w.notes != nil {
		note = w.notes(frame, inbound)
	}
	return w.p.WritePacket(w.iface, t, frame, inbound, note)
}

// ControlRecorder returns a recorder for a ControlSocket (Record) that
// writes each datagram it sends or receives to interface iface (of link
// type layers.LinkTypeRaw) as an IPv4/UDP packet between the socket's
// address and the peer's, stamped by clock. Errors writing the capture
// never fail a datagram; the first is kept for Err and recording stops.
func (p *PcapngWriter) ControlRecorder(iface int, clock func() time.Time) *DatagramRecorder {
	return &DatagramRecorder{p: p, iface: iface, clock: clock}
}

// DatagramRecorder writes a control socket's datagrams into a pcapng
// capture as IPv4/UDP packets. Safe for concurrent use.
type DatagramRecorder struct {
	p     *PcapngWriter
	iface int
	clock func() time.Time

	mu  sync.Mutex
	err error
}

var _ ControlRecorder = (*DatagramRecorder)(nil)

// RecordDatagram implements ControlRecorder.
func (r *DatagramRecorder) RecordDatagram(b []byte, from, to netip.AddrPort, inbound bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	pkt, err := UDPPacket(from, to, b)
	if err == nil {
		err = r.p.WritePacket(r.iface, r.clock(), pkt, inbound, "")
	}
	r.err = err
}

// Err returns the first error writing the capture, if any.
func (r *DatagramRecorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// UDPPacket returns an IPv4 packet carrying payload in a UDP datagram from
// from to to, with correct IPv4 and UDP checksums (TTL 64, DF set, IP id
// 0): how a control datagram is written into a capture.
func UDPPacket(from, to netip.AddrPort, payload []byte) ([]byte, error) {
	src, dst := from.Addr().Unmap(), to.Addr().Unmap()
	if !src.Is4() || !dst.Is4() {
		return nil, fmt.Errorf("udp packet %v -> %v: not IPv4", from, to)
	}
	ip := &layers.IPv4{
		Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: src.AsSlice(), DstIP: dst.AsSlice(),
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(from.Port()), DstPort: layers.UDPPort(to.Port())}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, err
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(payload)); err != nil {
		return nil, fmt.Errorf("udp packet %v -> %v: %w", from, to, err)
	}
	return buf.Bytes(), nil
}
