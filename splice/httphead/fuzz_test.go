package httphead

import (
	"errors"
	"testing"
	"unsafe"
)

// FuzzParse checks the promises the front-end relies on, for any input:
// no panic; only the documented errors; a SyntaxError points inside the
// buffer; on success every slice lies inside the head, BodyLen agrees with
// the framing fields, and the head alone, or a limit of exactly its length,
// parses the same; and no prefix of the input parses to anything but
// ErrIncomplete or the outcome of the whole.
func FuzzParse(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.head))
	}
	for _, tc := range invalidCases {
		f.Add([]byte(tc.head))
	}
	f.Add([]byte(typicalRequest))
	f.Fuzz(func(t *testing.T, buf []byte) {
		var r Request
		err := Parse(buf, 0, &r)
		var se *SyntaxError
		switch {
		case err == nil:
			checkRequest(t, buf, &r)
		case err == ErrIncomplete:
		case errors.As(err, &se):
			if se.Offset < 0 || se.Offset >= len(buf) || se.Reason == "" {
				t.Fatalf("SyntaxError %+v outside a %d-byte buffer", se, len(buf))
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
		checkPrefixes(t, buf, &r, err)
	})
}

func checkRequest(t *testing.T, buf []byte, r *Request) {
	if r.HeadLen < 4 || r.HeadLen > len(buf) {
		t.Fatalf("HeadLen %d for a %d-byte buffer", r.HeadLen, len(buf))
	}
	head := buf[:r.HeadLen]
	for name, s := range map[string][]byte{
		"Method": r.Method, "Target": r.Target, "Proto": r.Proto,
		"Host": r.Host, "Path": r.Path, "Cookie": r.Cookie,
	} {
		if !within(head, s) {
			t.Fatalf("%s %q is not a sub-slice of the head", name, s)
		}
	}
	switch {
	case r.Chunked && (r.BodyLen != -1 || r.ContentLength != -1):
		t.Fatalf("chunked with BodyLen %d ContentLength %d", r.BodyLen, r.ContentLength)
	case !r.Chunked && r.BodyLen != max(r.ContentLength, 0):
		t.Fatalf("BodyLen %d with ContentLength %d", r.BodyLen, r.ContentLength)
	}
	var again Request
	if err := Parse(head, 0, &again); err != nil || viewOf(&again) != viewOf(r) {
		t.Fatalf("the head alone parses to %+v, %v; the whole buffer to %+v", viewOf(&again), err, viewOf(r))
	}
	if err := Parse(buf, r.HeadLen, &again); err != nil || viewOf(&again) != viewOf(r) {
		t.Fatalf("limit = HeadLen parses to %+v, %v", viewOf(&again), err)
	}
	if err := Parse(buf, r.HeadLen-1, &again); err != ErrTooLarge {
		t.Fatalf("limit = HeadLen-1 gives %v, want ErrTooLarge", err)
	}
}

// checkPrefixes parses prefixes of buf (all of them for short inputs) and
// compares each outcome with whole, the outcome for all of buf.
func checkPrefixes(t *testing.T, buf []byte, whole *Request, wholeErr error) {
	step := 1 + len(buf)/256
	for n := 0; n < len(buf); n += step {
		var r Request
		err := Parse(buf[:n], 0, &r)
		switch {
		case err == ErrIncomplete:
			if wholeErr == nil && n >= whole.HeadLen {
				t.Fatalf("prefix of %d bytes incomplete, but the head is %d", n, whole.HeadLen)
			}
		case err == nil:
			if wholeErr != nil || viewOf(&r) != viewOf(whole) {
				t.Fatalf("prefix of %d bytes parses to %+v, whole buffer to %+v, %v", n, viewOf(&r), viewOf(whole), wholeErr)
			}
		case wholeErr == nil || err.Error() != wholeErr.Error():
			t.Fatalf("prefix of %d bytes gives %v, whole buffer %v", n, err, wholeErr)
		}
	}
}

// within reports whether s is nil or lies inside outer's memory.
func within(outer, s []byte) bool {
	if s == nil {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(outer))
}
