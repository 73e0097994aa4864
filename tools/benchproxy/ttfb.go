package benchproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// TTFB is the time to first byte over sequential new connections: from
// before the connect to the first response byte read, so it includes the
// handshake, the request and whatever stands between client and server.
type TTFB struct {
	Samples int     `json:"samples"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	MeanUS  float64 `json:"mean_us"`
	// FirstReplies: qsplice's shim's count over the measurement.
	FirstReplies FirstReplies `json:"first_replies,omitzero"`
}

// FirstReplies are the responses the shim read over a first-byte
// measurement (its /status: Responses), and those whose first reply the
// back-end's kernel had sent itself, as an echo (ResponsesFirstEchoed):
// the share is how often a connection's fast-path entry reached the
// kernel before the server's first reply, so that the first byte did not
// wait for the shim to wake. The warm-up requests count too.
type FirstReplies struct {
	Responses uint64 `json:"responses"`
	Echoed    uint64 `json:"echoed"`
}

func (f FirstReplies) since(before FirstReplies) FirstReplies {
	return FirstReplies{Responses: f.Responses - before.Responses, Echoed: f.Echoed - before.Echoed}
}

func (f FirstReplies) String() string {
	share := 0.0
	if f.Responses > 0 {
		share = 100 * float64(f.Echoed) / float64(f.Responses)
	}
	return fmt.Sprintf("the kernel echoed the first reply of %d of %d responses (%.0f%%)", f.Echoed, f.Responses, share)
}

// ttfbWarmup requests are made and not counted: they fill ARP caches and
// wake whatever sleeps.
const ttfbWarmup = 20

// measureTTFB makes n+ttfbWarmup sequential requests for path, each on a
// new connection (Connection: close), from inside namespace ns. Every
// response must be a complete 200.
func measureTTFB(ctx context.Context, ns, addr, path string, n int) (TTFB, error) {
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
	samples := make([]time.Duration, 0, n)
	buf := make([]byte, 64<<10)
	// The whole loop runs on one thread inside the namespace, so every
	// socket is created there without a namespace switch per request.
	err := netns.Do(ns, func() error {
		var d net.Dialer
		for i := 0; i < n+ttfbWarmup; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			ttfb, err := oneRequest(ctx, &d, addr, req, buf)
			if err != nil {
				return fmt.Errorf("request %d to %s%s: %w", i, addr, path, err)
			}
			if i >= ttfbWarmup {
				samples = append(samples, ttfb)
			}
		}
		return nil
	})
	if err != nil {
		return TTFB{}, err
	}
	return summarizeTTFB(samples), nil
}

// oneRequest connects, sends req, and returns the time until the first
// response byte; it reads the response to the end and checks it.
func oneRequest(ctx context.Context, d *net.Dialer, addr string, req, buf []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp4", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	n, err := conn.Read(buf)
	if n == 0 {
		return 0, fmt.Errorf("no response: %v", err)
	}
	ttfb := time.Since(start)
	const headLen = 12 // "HTTP/1.1 200"
	head := slices.Clone(buf[:min(n, headLen)])
	for err == nil {
		n, err = conn.Read(buf)
		head = append(head, buf[:min(n, headLen-len(head))]...)
	}
	if err != io.EOF {
		return 0, fmt.Errorf("reading the response: %w", err)
	}
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
		return 0, fmt.Errorf("response starts %q", head)
	}
	return ttfb, nil
}

func summarizeTTFB(samples []time.Duration) TTFB {
	t := TTFB{Samples: len(samples)}
	if len(samples) == 0 {
		return t
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var sum time.Duration
	for _, s := range sorted {
		sum += s
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	t.P50us = us(percentile(sorted, 0.50))
	t.P99us = us(percentile(sorted, 0.99))
	t.MeanUS = us(sum / time.Duration(len(sorted)))
	return t
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
