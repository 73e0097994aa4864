package timeline

import (
	"bufio"
	"os"
)

// Writer appends records to a JSON-lines file. It is not safe for
// concurrent use: the front-end writes from its controller's critical
// section, replay from its one loop.
type Writer struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
	n   uint64
}

// Create creates (or truncates) the file at path.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Write writes recs and flushes them, so that a reader following the file
// sees every connection that has ended: one write per call when they fit
// the buffer (64 KiB), and the front-end calls it once per pass that
// ended connections. A reader following the file may still catch a
// write half done (the kernel copies it into the file page by page, and
// more records than the buffer holds take several writes): Read leaves
// out a last line without its newline.
func (w *Writer) Write(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		w.buf = recs[i].AppendJSON(w.buf[:0])
		if _, err := w.w.Write(w.buf); err != nil {
			return err
		}
		w.n++
	}
	return w.w.Flush()
}

// Records is how many records were written.
func (w *Writer) Records() uint64 { return w.n }

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
