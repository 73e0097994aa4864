package experiment

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/lab"
)

// labStatus is the part of the front-end's /status the feedback
// experiment reads.
type labStatus struct {
	Queue    int                                  `json:"queue"`
	Backends []controller.BackendStatus           `json:"backends"`
	Feedback *controller.FeedbackStatus           `json:"feedback"`
	Engine   struct{ Answered map[string]uint64 } `json:"engine"`
}

// fetchStatus reads /status once, trying again a few times while the
// front-end is too busy to answer.
func fetchStatus(ctx context.Context, c *http.Client) (*labStatus, error) {
	return retryBusy(ctx, func() (*labStatus, error) { return fetchStatusOnce(ctx, c) })
}

func fetchStatusOnce(ctx context.Context, c *http.Client) (*labStatus, error) {
	var st labStatus
	if _, err := lab.GetJSON(ctx, c, lab.AdminURL+"/status", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// settleStatus waits until the front-end has no request queued or in
// service, so that its counts cover everything the run sent; it gives up
// after limit.
func settleStatus(ctx context.Context, c *http.Client, limit time.Duration) (*labStatus, error) {
	return waitIdle(ctx, limit, func() (*labStatus, error) { return fetchStatus(ctx, c) }, func(st *labStatus) int64 {
		busy := int64(st.Queue)
		for _, b := range st.Backends {
			busy += int64(b.InService)
		}
		if st.Feedback != nil {
			for _, cl := range st.Feedback.Classes {
				busy += int64(cl.Reserve)
			}
		}
		return busy
	})
}

// statusSampler reads the feedback state once per period for a run of
// the given length: sample k is the state at (k+1) periods, with the
// time it was read (the middle of its request, from the sampler's
// start), nil where the front-end did not answer in time.
type statusSampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []statusObs
}

func startStatusSampler(ctx context.Context, c *http.Client, period, length time.Duration) *statusSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &statusSampler{cancel: cancel, done: make(chan struct{}),
		samples: make([]statusObs, int(length/period))}
	start := time.Now()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k := int((time.Since(start)+period/2)/period) - 1
			if k >= len(s.samples) {
				return
			}
			sent := time.Since(start)
			st, err := fetchStatusOnce(ctx, c)
			if err != nil || st.Feedback == nil || k < 0 {
				continue // a missed sample: its point repeats the one before
			}
			at := (sent + time.Since(start)) / 2
			s.mu.Lock()
			s.samples[k] = statusObs{at: at, f: st.Feedback}
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns the samples and how many are
// missing.
func (s *statusSampler) stop() ([]statusObs, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	missed := 0
	for _, o := range s.samples {
		if o.f == nil {
			missed++
		}
	}
	return s.samples, missed
}
