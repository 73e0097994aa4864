package experiment

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// retryBusy tries again after ordinary errors, stops at once at a final
// one, and gives up after busyTries with the last error.
func TestRetryBusy(t *testing.T) {
	ctx := context.Background()
	calls := 0
	v, err := retryBusy(ctx, func() (int, error) {
		calls++
		if calls < 3 {
			return 0, errors.New("busy")
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 3 {
		t.Errorf("got %d, %v after %d calls; want 7 after 3", v, err, calls)
	}
	calls = 0
	bad := errors.New("does not parse")
	if _, err := retryBusy(ctx, func() (int, error) { calls++; return 0, finalError{bad} }); err != bad || calls != 1 {
		t.Errorf("final error: %v after %d calls, want %v after 1", err, calls, bad)
	}
	calls = 0
	if _, err := retryBusy(ctx, func() (int, error) { calls++; return 0, errors.New("busy") }); err == nil || calls != busyTries {
		t.Errorf("always busy: %v after %d calls, want an error after %d", err, calls, busyTries)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := retryBusy(cancelled, func() (int, error) { return 0, errors.New("busy") }); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

// waitIdle returns the first reading with nothing busy, or, past its
// limit, the last reading and how many were still busy.
func TestWaitIdle(t *testing.T) {
	ctx := context.Background()
	readings := []int64{2, 1, 0, 5}
	next := 0
	fetch := func() (int64, error) { next++; return readings[next-1], nil }
	busy := func(n int64) int64 { return n }
	if v, err := waitIdle(ctx, time.Minute, fetch, busy); v != 0 || err != nil || next != 3 {
		t.Errorf("got %d, %v after %d readings; want 0 after 3", v, err, next)
	}
	next = 3 // 5 busy from now on
	readings = append(readings, 5)
	v, err := waitIdle(ctx, 0, fetch, busy)
	if v != 5 || err == nil || !strings.Contains(err.Error(), "still has 5 requests queued or in service after 0s") {
		t.Errorf("past the limit: %d, %v", v, err)
	}
	failed := errors.New("no answer")
	if _, err := waitIdle(ctx, time.Minute, func() (int64, error) { return 0, failed }, busy); err != failed {
		t.Errorf("fetch error: %v", err)
	}
}
