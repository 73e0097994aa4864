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
	// to read/write (logged once) where it does not: the default.
	//
	// Measured in the lab (docs/results.md), io_uring cuts the shim's
	// system calls under bulk load to a quarter (0.62 -> 0.16 per frame).
	// A frame's read completes on its own as it arrives, so the loop's
	// passes get smaller: on a machine where the shim shares two cores
	// with twenty runnable tasks (sixth session) that cost it 10-55% more
	// CPU per one-connection request; at a load of 3-4 (eighth session,
	// six interleaved rounds) CPU per request, per GB, throughput and the
	// first byte's p50 were the same as rw's within the noise, p99 about
	// 10% later. rw remains for kernels and sandboxes without io_uring.
	TAPIOAuto TAPIO = "auto"
	// TAPIOURing insists on io_uring: New fails without it.
	TAPIOURing TAPIO = "uring"
	// TAPIORW reads with one readv(2) per frame and writes with one
	// writev(2) per frame (link.OffloadTAP).
	TAPIORW TAPIO = "rw"
)

// TAPIOUsage is the -tap-io flag's help.
const TAPIOUsage = "how the offload TAP is read and written: auto (io_uring if the kernel allows it, else rw, with a " +
	"warning), uring (io_uring or fail), rw (a readv per frame read, a writev per frame written). A TAP has no " +
	"batched read or write: with rw every frame crossing it costs a system call; io_uring (Linux 6.7+) keeps a " +
	"multishot read armed and submits a pass's writes with one io_uring_enter, a quarter of the system calls under " +
	"bulk load (docs/results.md)"

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
