// Package content makes the response bodies of the lab's back-ends:
// pseudo-random bytes fully determined by a back-end id and a size.
//
// Place in the data flow: the test web server (tools/testserver) answers
// GET /data/<size> with Reader(id, size). The load generator and the
// end-to-end tests recompute the same bytes, or just their SHA256, to check
// that what reached the client through the splice is exactly what the
// back-end sent, with no byte lost, duplicated or shifted by a sequence
// translation error. Different ids give different bytes, so a reply that
// came from the wrong back-end is caught too.
//
// The bytes come from splitmix64 run in counter mode: the 8 bytes at offset
// 8k are a function of (seed, k) alone, so any offset can be produced
// without generating what comes before it (ReadAt, Seek), and filling runs
// at several GB/s. This is test data, not cryptography.
package content

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
)

// Body is a deterministic body of a fixed size. It implements io.Reader,
// io.ReaderAt, io.Seeker and io.WriterTo.
type Body struct {
	seed   uint64
	size   int64
	offset int64 // next byte Read returns
}

// NewBody returns the body for (backendID, size), positioned at its start.
// The bytes depend on both: the 1K body is not a prefix of the 1M one.
func NewBody(backendID uint32, size int64) *Body {
	return &Body{seed: seedOf(backendID, size), size: max(size, 0)}
}

// Reader returns the size bytes of the body for (backendID, size). The
// returned reader is a *Body.
func Reader(backendID uint32, size int64) io.Reader { return NewBody(backendID, size) }

// SHA256 returns the SHA-256 digest of the body for (backendID, size).
func SHA256(backendID uint32, size int64) [32]byte {
	h := sha256.New()
	NewBody(backendID, size).WriteTo(h) // a hash.Hash never fails to write
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Size returns the body's length in bytes.
func (b *Body) Size() int64 { return b.size }

// Read fills p with the next bytes of the body.
func (b *Body) Read(p []byte) (int, error) {
	n, err := b.ReadAt(p, b.offset)
	b.offset += int64(n)
	if err == io.EOF && n > 0 {
		err = nil // Read reports EOF on the next call, as io.Reader allows
	}
	return n, err
}

// ReadAt fills p with the bytes at offset off. It returns io.EOF with
// fewer than len(p) bytes when the body ends first.
func (b *Body) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("content: negative offset")
	}
	if off >= b.size {
		return 0, io.EOF
	}
	n := len(p)
	if remaining := b.size - off; int64(n) > remaining {
		n = int(remaining)
	}
	b.fill(p[:n], off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Seek sets the offset of the next Read, as io.Seeker describes.
func (b *Body) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.offset
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("content: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("content: seek before the start")
	}
	b.offset = offset
	return offset, nil
}

// WriteTo writes the rest of the body to w, in chunks from one buffer, so
// io.Copy from a Body costs no allocation per chunk.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 64<<10)
	var written int64
	for b.offset < b.size {
		n, _ := b.ReadAt(buf, b.offset)
		m, err := w.Write(buf[:n])
		written += int64(m)
		b.offset += int64(m)
		if err != nil {
			return written, err
		}
		if m != n {
			return written, io.ErrShortWrite
		}
	}
	return written, nil
}

// fill writes the body's bytes at offset off into p.
func (b *Body) fill(p []byte, off int64) {
	word := uint64(off) / 8
	if skip := int(off % 8); skip != 0 { // unaligned start
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], b.word(word))
		n := copy(p, w[skip:])
		p = p[n:]
		word++
	}
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, b.word(word))
		p = p[8:]
		word++
	}
	if len(p) > 0 { // short tail
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], b.word(word))
		copy(p, w[:])
	}
}

// golden is splitmix64's increment, 2^64 divided by the golden ratio.
const golden = 0x9e3779b97f4a7c15

// word returns the k-th 8-byte word of the body.
func (b *Body) word(k uint64) uint64 { return mix64(b.seed + (k+1)*golden) }

// mix64 is splitmix64's finaliser: every input bit affects every output bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func seedOf(backendID uint32, size int64) uint64 {
	return mix64(uint64(backendID) ^ mix64(uint64(size)+golden))
}
