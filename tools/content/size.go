package content

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// Size suffixes are binary: K = 1024.
var units = []struct {
	suffix byte
	bytes  int64
}{{'G', 1 << 30}, {'M', 1 << 20}, {'K', 1 << 10}}

// ParseSize reads a body size as written in URLs and flags: a decimal
// number of bytes ("0", "1500") or of KiB, MiB or GiB with the suffix K, M
// or G ("1K" = 1024, "64M"). Lower-case suffixes are accepted too. No sign,
// no fraction, no spaces.
func ParseSize(s string) (int64, error) {
	digits, scale := s, int64(1)
	if n := len(s); n > 0 {
		last := s[n-1] &^ 0x20 // upper-case a letter
		for _, u := range units {
			if last == u.suffix {
				digits, scale = s[:n-1], u.bytes
			}
		}
	}
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, fmt.Errorf("content: size %q is not a number with an optional K, M or G", s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("content: size %q is not a number with an optional K, M or G", s)
	}
	if n > (1<<63-1)/scale {
		return 0, fmt.Errorf("content: size %q is too large", s)
	}
	return n * scale, nil
}

// FormatSize writes n the way ParseSize reads it, with the largest suffix
// that divides it exactly: 1024 gives "1K", 1500 gives "1500". Negative
// sizes are written as plain numbers, which ParseSize refuses.
func FormatSize(n int64) string {
	if n > 0 {
		for _, u := range units {
			if n%u.bytes == 0 {
				return strconv.FormatInt(n/u.bytes, 10) + string(u.suffix)
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// WriteFile writes the body for (backendID, size) to path, for web servers
// such as nginx that serve files. On error the partial file is removed.
func WriteFile(path string, backendID uint32, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, NewBody(backendID, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("content: writing %s: %w", path, err)
	}
	return nil
}
