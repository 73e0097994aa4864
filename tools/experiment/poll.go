package experiment

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The lab front-end's admin pages (/status, /metrics) are answered from
// its event loop, which a loaded lab can keep too busy to answer at
// once; both readers try again, and both wait for the front-end to go
// idle after a run, the same way.
const (
	busyTries = 20
	pollEvery = 100 * time.Millisecond
)

// retryBusy calls fetch until it succeeds, at most busyTries times,
// pollEvery apart, and returns the last error if none did. An error
// fetch marks final (a page that does not parse) ends it at once.
func retryBusy[T any](ctx context.Context, fetch func() (T, error)) (T, error) {
	var zero T
	var last error
	for try := 0; try < busyTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return zero, ctx.Err()
			case <-time.After(pollEvery):
			}
		}
		v, err := fetch()
		var f finalError
		switch {
		case err == nil:
			return v, nil
		case errors.As(err, &f):
			return v, f.error
		}
		last = err
	}
	return zero, last
}

// finalError is an error retryBusy does not try again after.
type finalError struct{ error }

// waitIdle reads the front-end with fetch every pollEvery until busy says
// no request is queued or in service, so that its counts cover
// everything a run caused; it gives up after limit, returning the last
// reading with the error.
func waitIdle[T any](ctx context.Context, limit time.Duration, fetch func() (T, error), busy func(T) int64) (T, error) {
	var zero T
	deadline := time.Now().Add(limit)
	for {
		v, err := fetch()
		if err != nil {
			return zero, err
		}
		n := busy(v)
		if n == 0 {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("front-end still has %d requests queued or in service after %v", n, limit)
		}
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}
