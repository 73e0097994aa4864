package link

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// PcapSnaplen is the snapshot length written in pcap headers; longer frames
// are cut to it (the record keeps the original length).
const PcapSnaplen = 262144

// PcapWriter writes Ethernet frames to a classic pcap stream with
// nanosecond timestamps. The caller supplies each frame's time (the engine's
// clock), so a replay produces a byte-identical capture. It is not safe for
// concurrent use; Recorder adds the locking.
type PcapWriter struct {
	w *pcapgo.Writer
}

// NewPcapWriter writes the pcap file header to w and returns a writer for
// the records. It does not buffer: wrap w in a bufio.Writer (and flush it)
// when writing to a file.
func NewPcapWriter(w io.Writer) (*PcapWriter, error) {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(PcapSnaplen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcap: write file header: %w", err)
	}
	return &PcapWriter{w: pw}, nil
}

// WriteFrame appends one record stamped t. The zero time.Time is written as
// the Unix epoch (pcapgo would otherwise substitute the wall clock and break
// determinism).
func (p *PcapWriter) WriteFrame(t time.Time, frame []byte) error {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	captured := frame
	if len(captured) > PcapSnaplen {
		captured = captured[:PcapSnaplen]
	}
	ci := gopacket.CaptureInfo{
		Timestamp:     t,
		CaptureLength: len(captured),
		Length:        len(frame),
	}
	if err := p.w.WritePacket(ci, captured); err != nil {
		return fmt.Errorf("pcap: write frame: %w", err)
	}
	return nil
}

// PcapReader reads Ethernet frames from a classic pcap stream, with
// microsecond or nanosecond timestamps in either byte order.
type PcapReader struct {
	r *pcapgo.Reader
}

// NewPcapReader reads the pcap file header from r. It fails unless the link
// type is Ethernet.
func NewPcapReader(r io.Reader) (*PcapReader, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("pcap: read file header: %w", err)
	}
	if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("pcap: link type %v, want Ethernet", lt)
	}
	return &PcapReader{r: pr}, nil
}

// Next returns the next record's time and captured bytes (a frame cut by
// the capture's snaplen comes back cut). The frame is a fresh slice the
// caller may keep. At the end of the stream Next returns io.EOF; a stream
// cut inside a record gives io.ErrUnexpectedEOF.
func (p *PcapReader) Next() (t time.Time, frame []byte, err error) {
	data, ci, err := p.r.ReadPacketData()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return time.Time{}, nil, io.EOF
		}
		return time.Time{}, nil, fmt.Errorf("pcap: read frame: %w", err)
	}
	return ci.Timestamp, data, nil
}

// Recorder is a Link wrapper that writes every frame read from or written
// to the wrapped link into a capture (pcap or one interface of a pcapng
// file), stamped by clock. Daemons use it
// for captures.
//
// Cost: each frame takes a mutex and two writes to the underlying
// io.Writer (use a bufio.Writer); fine for debugging captures, not for the
// engine's hot path. Errors writing the capture never fail the frame; the
// first one is kept for Err and recording stops.
type Recorder struct {
	link  Link
	clock func() time.Time

	mu  sync.Mutex // serialises ReadFrame and WriteFrame on the capture writer
	w   FrameWriter
	err error
}

// FrameWriter is where a Recorder writes frames: a *PcapWriter, or one
// interface of a pcapng capture (PcapngWriter.Interface), which is also
// told each frame's direction.
type FrameWriter interface {
	WriteFrame(t time.Time, frame []byte) error
}

// directedFrameWriter is a FrameWriter that records directions.
type directedFrameWriter interface {
	FrameWriter
	WriteFrameDir(t time.Time, frame []byte, inbound bool) error
}

var _ Link = (*Recorder)(nil)

// NewRecorder wraps l. Frames are recorded after a successful read and
// after a successful write. Close closes l, not the capture's io.Writer.
func NewRecorder(l Link, w FrameWriter, clock func() time.Time) *Recorder {
	return &Recorder{link: l, w: w, clock: clock}
}

// ReadFrame implements Link.
func (r *Recorder) ReadFrame(buf []byte) (int, error) {
	n, err := r.link.ReadFrame(buf)
	if err == nil {
		r.record(buf[:n], Inbound)
	}
	return n, err
}

// WriteFrame implements Link.
func (r *Recorder) WriteFrame(frame []byte) error {
	err := r.link.WriteFrame(frame)
	if err == nil {
		r.record(frame, Outbound)
	}
	return err
}

func (r *Recorder) record(frame []byte, inbound bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if d, ok := r.w.(directedFrameWriter); ok {
		r.err = d.WriteFrameDir(r.clock(), frame, inbound)
		return
	}
	r.err = r.w.WriteFrame(r.clock(), frame)
}

// Err returns the first error writing the capture, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close implements Link.
func (r *Recorder) Close() error { return r.link.Close() }

// Name implements Link; it is the wrapped link's name.
func (r *Recorder) Name() string { return r.link.Name() }

// Stats implements Link; they are the wrapped link's.
func (r *Recorder) Stats() Stats { return r.link.Stats() }
