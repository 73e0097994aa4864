package sched

import (
	"errors"
	"strconv"
	"strings"
)

// DefaultFeedbackTreePath serves tree k of "/img/a.jpg" as
// "/tree2/img/a.jpg".
const DefaultFeedbackTreePath = "/tree{tree}{path}"

// CheckTreePath accepts a template that makes an absolute path: it starts
// with '/', names {path} once, and has no byte a request line cannot
// carry in a path (space, control, '?', '#'). Configuration readers call
// it to name the file and line of a bad one.
func CheckTreePath(t string) error {
	switch {
	case !strings.HasPrefix(t, "/"):
		return errors.New("must start with /")
	case strings.Count(t, "{path}") != 1:
		return errors.New("must name {path} once")
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f || c == '?' || c == '#' {
			return errors.New("holds a byte a request path cannot carry")
		}
	}
	return nil
}

// AppendTreePath appends to dst the path that serves path from content
// tree tree, by template (FeedbackConfig.TreePath): {tree} becomes the
// tree's number and {path} the path without its leading '/' when the
// template puts a '/' right before it, so "/tree{tree}/{path}" and
// "/tree{tree}{path}" make the same "/tree2/img/a.jpg". It allocates
// nothing when dst has room.
func AppendTreePath(dst []byte, template string, tree uint8, path string) []byte {
	for t := template; t != ""; {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			return append(dst, t...)
		}
		dst = append(dst, t[:i]...)
		t = t[i:]
		switch {
		case strings.HasPrefix(t, "{tree}"):
			dst = strconv.AppendUint(dst, uint64(tree), 10)
			t = t[len("{tree}"):]
		case strings.HasPrefix(t, "{path}"):
			p := path
			if len(dst) > 0 && dst[len(dst)-1] == '/' {
				p = strings.TrimPrefix(p, "/")
			}
			dst = append(dst, p...)
			t = t[len("{path}"):]
		default:
			dst = append(dst, '{')
			t = t[1:]
		}
	}
	return dst
}
