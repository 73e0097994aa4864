package backend

import (
	"fmt"
	"log/slog"

	"github.com/qsplice/qsplice/splice/link"
)

// TAPIO is how the workers read and write their queues of the offload
// TAP (Config.TAPIO, the -tap-io flag).
type TAPIO string

const (
	// TAPIOAuto uses io_uring where the kernel allows it and falls back
	// to read/write (logged once) where it does not.
	TAPIOAuto TAPIO = "auto"
	// TAPIOURing insists on io_uring: New fails without it.
	TAPIOURing TAPIO = "uring"
	// TAPIORW reads with one readv(2) per frame and writes with one
	// writev(2) per frame (link.OffloadTAP).
	TAPIORW TAPIO = "rw"
)

// TAPIOUsage is the -tap-io flag's help.
const TAPIOUsage = "how the offload TAP is read and written: auto (io_uring if the kernel allows it, else rw), " +
	"uring (io_uring or fail), rw (a readv per frame read, a writev per frame written). A TAP has no batched " +
	"read or write, so with rw every client ACK crossing to the kernel costs a system call; io_uring keeps reads " +
	"in flight and submits a pass's writes with one io_uring_enter"

// ParseTAPIO parses the -tap-io flag; "" is auto.
func ParseTAPIO(s string) (TAPIO, error) {
	switch m := TAPIO(s); m {
	case "":
		return TAPIOAuto, nil
	case TAPIOAuto, TAPIOURing, TAPIORW:
		return m, nil
	}
	return "", fmt.Errorf("%q: want auto, uring or rw", s)
}

// openURing wraps a TAP queue in io_uring; tests replace it to play a
// kernel that refuses.
var openURing = func(t *link.OffloadTAP) (*link.UringTAP, error) {
	return link.NewUringTAP(t, link.UringTAPConfig{})
}

// tapLinks returns the links the workers drive, one per queue: each
// queue wrapped in a link.UringTAP (open, usually link.NewUringTAP) under
// auto and uring, the queues themselves under rw and when auto finds
// io_uring refused. A refusal under auto is logged once, with the reason.
// On error every queue is still the caller's to close.
func tapLinks(taps []*link.OffloadTAP, mode TAPIO, open func(*link.OffloadTAP) (*link.UringTAP, error), log *slog.Logger) ([]link.BatchLink, []*link.UringTAP, error) {
	links := make([]link.BatchLink, len(taps))
	for i, t := range taps {
		links[i] = t
	}
	if mode == TAPIORW {
		return links, nil, nil
	}
	var urings []*link.UringTAP
	for i, t := range taps {
		u, err := open(t)
		if err != nil {
			for _, u := range urings {
				u.Close()
			}
			if mode == TAPIOURing {
				return nil, nil, fmt.Errorf("-tap-io uring: %w", err)
			}
			log.Warn("io_uring unavailable: reading and writing the TAP with readv/writev (-tap-io rw)", "tap", t.Name(), "err", err)
			// The closed rings closed their queues: reopening them is
			// the caller's, as after any failure here.
			if len(urings) > 0 {
				return nil, nil, fmt.Errorf("io_uring refused on queue %d of %d after the first: %w", i, len(taps), err)
			}
			return links, nil, nil
		}
		urings = append(urings, u)
		links[i] = u
	}
	return links, urings, nil
}
