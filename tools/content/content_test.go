package content

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSizesExact(t *testing.T) {
	for _, size := range []int64{0, 1, 7, 8, 9, 1500, 1<<20 + 3} {
		if got := int64(len(readAll(t, Reader(1, size)))); got != size {
			t.Errorf("Reader(1, %d) gave %d bytes", size, got)
		}
		n, err := io.Copy(io.Discard, Reader(1, size))
		if err != nil || n != size {
			t.Errorf("io.Copy of size %d: %d bytes, %v", size, n, err)
		}
	}
	if n := len(readAll(t, Reader(1, -5))); n != 0 {
		t.Errorf("negative size gave %d bytes", n)
	}
}

func TestDeterministic(t *testing.T) {
	a := readAll(t, Reader(3, 100_000))
	if b := readAll(t, Reader(3, 100_000)); !bytes.Equal(a, b) {
		t.Fatal("two readers for the same (id, size) differ")
	}
	// Reads of awkward lengths at unaligned offsets must give the same bytes.
	r := Reader(3, 100_000)
	var pieces []byte
	for i := 1; len(pieces) < len(a); i = i%13 + 1 {
		buf := make([]byte, i)
		n, err := r.Read(buf)
		pieces = append(pieces, buf[:n]...)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a, pieces) {
		t.Fatal("reading in small uneven pieces gives different bytes")
	}
}

func TestDifferentInputsDiffer(t *testing.T) {
	base := readAll(t, Reader(1, 4096))
	if other := readAll(t, Reader(2, 4096)); bytes.Equal(base, other) {
		t.Fatal("ids 1 and 2 give the same body")
	}
	if longer := readAll(t, Reader(1, 8192)); bytes.Equal(base, longer[:4096]) {
		t.Fatal("the 4K body is a prefix of the 8K one; sizes should change the bytes")
	}
	// Not constant and not periodic in 8-byte words.
	if bytes.Equal(base[:8], base[8:16]) || bytes.Count(base, base[:8]) != 1 {
		t.Fatal("body repeats its first word")
	}
}

func TestReadAtAndSeek(t *testing.T) {
	const size = 10_000
	all := readAll(t, Reader(5, size))
	b := NewBody(5, size)
	buf := make([]byte, 100)
	for _, off := range []int64{0, 1, 7, 8, 4093, size - 100} {
		if n, err := b.ReadAt(buf, off); n != 100 || err != nil || !bytes.Equal(buf, all[off:off+100]) {
			t.Fatalf("ReadAt(%d): %d, %v, bytes match %v", off, n, err, bytes.Equal(buf, all[off:off+100]))
		}
	}
	if n, err := b.ReadAt(buf, size-30); n != 30 || err != io.EOF || !bytes.Equal(buf[:30], all[size-30:]) {
		t.Fatalf("ReadAt across the end: %d, %v", n, err)
	}
	if pos, err := b.Seek(-10, io.SeekEnd); pos != size-10 || err != nil {
		t.Fatalf("Seek from end: %d, %v", pos, err)
	}
	if rest := readAll(t, b); !bytes.Equal(rest, all[size-10:]) {
		t.Fatal("Read after Seek gives the wrong bytes")
	}
	if _, err := b.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("Seek before the start succeeded")
	}
}

func TestSHA256(t *testing.T) {
	for _, size := range []int64{0, 1, 1500, 1 << 20} {
		if got, want := SHA256(9, size), sha256.Sum256(readAll(t, Reader(9, size))); got != want {
			t.Errorf("SHA256(9, %d) does not match the digest of the body", size)
		}
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "1500": 1500, "1K": 1024, "1M": 1 << 20, "64M": 64 << 20, "2G": 2 << 30, "3k": 3072, "007": 7,
	} {
		if got, err := ParseSize(s); got != want || err != nil {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "-1", "+1", "1.5M", "1 K", "1KB", "1T", "x", "1KK", "9223372036854775808", "8589934592G"} {
		if got, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", s, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1500: "1500", 1024: "1K", 1536: "1536", 1 << 20: "1M", 64 << 20: "64M", 3 << 30: "3G", 1025: "1025"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	for _, n := range []int64{0, 1, 1023, 1024, 1500, 1 << 20, 5<<20 + 1024, 1 << 40, 1<<63 - 1} {
		if back, err := ParseSize(FormatSize(n)); back != n || err != nil {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "body")
	if err := WriteFile(path, 4, 70_000); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != SHA256(4, 70_000) || len(got) != 70_000 {
		t.Fatalf("file holds %d bytes that do not match the body", len(got))
	}
	if err := WriteFile(filepath.Join(path, "not-a-dir", "x"), 4, 10); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
}

func BenchmarkRead(b *testing.B) {
	buf := make([]byte, 64<<10)
	r := NewBody(1, 1<<62)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		r.Read(buf)
	}
}
