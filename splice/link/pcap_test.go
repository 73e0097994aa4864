package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPcapRoundTripKeepsNanoseconds(t *testing.T) {
	var file bytes.Buffer
	w, err := NewPcapWriter(&file)
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{
		time.Unix(1700000000, 123456789),
		time.Unix(1700000000, 123456790),
		{}, // zero: written as the epoch, never as the wall clock
	}
	frames := [][]byte{[]byte("first frame"), bytes.Repeat([]byte{0xAB}, 1514), {}}
	for i := range frames {
		if err := w.WriteFrame(times[i], frames[i]); err != nil {
			t.Fatal(err)
		}
	}

	r, err := NewPcapReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range frames {
		ts, frame, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		wantTime := times[i]
		if wantTime.IsZero() {
			wantTime = time.Unix(0, 0)
		}
		if !ts.Equal(wantTime) {
			t.Errorf("record %d time %v, want %v", i, ts, wantTime)
		}
		if !bytes.Equal(frame, want) {
			t.Errorf("record %d: %d bytes differ from the %d written", i, len(frame), len(want))
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
}

func TestPcapWriterIsDeterministic(t *testing.T) {
	write := func() []byte {
		var file bytes.Buffer
		w, err := NewPcapWriter(&file)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteFrame(time.Unix(5, 6), []byte{1, 2, 3})
		w.WriteFrame(time.Unix(7, 8), []byte{4, 5})
		return file.Bytes()
	}
	if a, b := write(), write(); !bytes.Equal(a, b) {
		t.Fatal("same frames and times gave different captures")
	}
}

func TestPcapWriterCutsFramesAtSnaplen(t *testing.T) {
	var file bytes.Buffer
	w, _ := NewPcapWriter(&file)
	if err := w.WriteFrame(time.Unix(1, 0), make([]byte, PcapSnaplen+100)); err != nil {
		t.Fatal(err)
	}
	rec := file.Bytes()[24:]
	if incl, orig := binary.LittleEndian.Uint32(rec[8:]), binary.LittleEndian.Uint32(rec[12:]); incl != PcapSnaplen || orig != PcapSnaplen+100 {
		t.Fatalf("record lengths %d/%d, want %d/%d", incl, orig, PcapSnaplen, PcapSnaplen+100)
	}
}

// microsecondPcap builds a classic microsecond-resolution capture by hand,
// in the given byte order, as tcpdump writes by default.
func microsecondPcap(order binary.AppendByteOrder, sec, usec uint32, frame []byte) []byte {
	var b []byte
	b = order.AppendUint32(b, 0xa1b2c3d4)
	b = order.AppendUint16(b, 2)
	b = order.AppendUint16(b, 4)
	b = order.AppendUint32(b, 0)     // thiszone
	b = order.AppendUint32(b, 0)     // sigfigs
	b = order.AppendUint32(b, 65535) // snaplen
	b = order.AppendUint32(b, 1)     // Ethernet
	b = order.AppendUint32(b, sec)
	b = order.AppendUint32(b, usec)
	b = order.AppendUint32(b, uint32(len(frame)))
	b = order.AppendUint32(b, uint32(len(frame)))
	return append(b, frame...)
}

func TestPcapReaderReadsMicrosecondFiles(t *testing.T) {
	frame := []byte("a microsecond frame")
	for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		r, err := NewPcapReader(bytes.NewReader(microsecondPcap(order, 1700000000, 654321, frame)))
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		ts, got, err := r.Next()
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		if want := time.Unix(1700000000, 654321000); !ts.Equal(want) || !bytes.Equal(got, frame) {
			t.Errorf("%v: got %v %q, want %v %q", order, ts, got, want, frame)
		}
	}
}

func TestPcapReaderRejectsBadInput(t *testing.T) {
	good := microsecondPcap(binary.LittleEndian, 1, 2, []byte("0123456789"))
	r, err := NewPcapReader(bytes.NewReader(good[:len(good)-3]))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("record cut short: %v, want io.ErrUnexpectedEOF", err)
	}

	notEthernet := bytes.Clone(good)
	binary.LittleEndian.PutUint32(notEthernet[20:], 101) // raw IP
	if _, err := NewPcapReader(bytes.NewReader(notEthernet)); err == nil {
		t.Error("raw-IP capture accepted")
	}
	if _, err := NewPcapReader(strings.NewReader("not a pcap file at all..")); err == nil {
		t.Error("garbage accepted")
	}
}

// TestPcapWriterOutputReadsInTshark checks the capture against an
// independent reader, when tshark is installed.
func TestPcapWriterOutputReadsInTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewPcapWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	frame := testFrame(broadcastMAC, "tshark")
	if err := w.WriteFrame(time.Unix(1700000000, 123456789), frame); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-r", path, "-T", "fields",
		"-e", "frame.time_epoch", "-e", "frame.len", "-e", "eth.type").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "1700000000.123456789\t60\t0x88b5"; got != want {
		t.Fatalf("tshark read %q, want %q", got, want)
	}
}

func TestRecorderCapturesBothDirectionsInOrder(t *testing.T) {
	a, b := NewMemPair(4)
	defer b.Close()
	var file bytes.Buffer
	w, err := NewPcapWriter(&file)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Unix(1000, 0)
	clock := func() time.Time { tick = tick.Add(time.Millisecond); return tick }
	rec := NewRecorder(a, w, clock)
	defer rec.Close()

	if err := rec.WriteFrame([]byte("out")); err != nil {
		t.Fatal(err)
	}
	b.WriteFrame([]byte("in"))
	buf := make([]byte, 16)
	if n, err := rec.ReadFrame(buf); err != nil || string(buf[:n]) != "in" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if rec.Name() != a.Name() || rec.Stats() != a.Stats() {
		t.Error("recorder does not report the wrapped link's name and stats")
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}

	r, err := NewPcapReader(&file)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"out", "in"} {
		ts, frame, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if wantTime := time.Unix(1000, 0).Add(time.Duration(i+1) * time.Millisecond); string(frame) != want || !ts.Equal(wantTime) {
			t.Errorf("record %d: %q at %v, want %q at %v", i, frame, ts, want, wantTime)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("extra records: %v", err)
	}
}

func TestRecorderKeepsFirstCaptureErrorWithoutFailingFrames(t *testing.T) {
	a, b := NewMemPair(4)
	defer b.Close()
	full := &failingWriter{room: 24 + 16} // file header and one record header
	w, err := NewPcapWriter(full)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(a, w, func() time.Time { return time.Unix(1, 0) })
	defer rec.Close()
	for range 3 {
		if err := rec.WriteFrame([]byte("frame")); err != nil {
			t.Fatalf("frame failed because the capture did: %v", err)
		}
	}
	if rec.Err() == nil {
		t.Fatal("capture error not reported")
	}
	if s := a.Stats(); s.TxFrames != 3 {
		t.Fatalf("%d frames sent, want 3", s.TxFrames)
	}
	if full.writes != 3 {
		t.Errorf("recorder kept writing after the first error: %d writes", full.writes)
	}
}

// failingWriter accepts room bytes and fails after that.
type failingWriter struct {
	room   int
	writes int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.writes++
	if len(p) > f.room {
		return 0, errors.New("disk full")
	}
	f.room -= len(p)
	return len(p), nil
}
