package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// lpModel is a deliberately naive LifoPri: plain slices, a sort per
// decision, the rules of the documentation written out directly. The
// random test below checks the real policy against it.
type lpModel struct {
	classes []Class
	mode    Mode
	timeout int64
	lifo    bool
	queues  [][]lpModelEntry // per class; in ModeSingleFIFO only queues[0] is used
	counts  []ClassState
}

type lpModelEntry struct {
	r     Request
	at    int64
	class int
}

func newLpModel(cfg LifoPriConfig) *lpModel {
	m := &lpModel{classes: cfg.Classes, mode: cfg.Mode, timeout: int64(cfg.QueueTimeout)}
	m.queues = make([][]lpModelEntry, len(cfg.Classes))
	for _, c := range cfg.Classes {
		m.counts = append(m.counts, ClassState{Name: c.Name, Kind: c.Kind, Utility: c.Utility})
	}
	return m
}

func (m *lpModel) classIndex(name string) int {
	return slices.IndexFunc(m.classes, func(c Class) bool { return c.Name == name })
}

func (m *lpModel) enqueue(r Request, now int64, singleCap int) error {
	i := m.classIndex(r.Customer)
	if i < 0 {
		return ErrUnknownCustomer
	}
	q, limit := i, m.classes[i].QueueCap
	if m.mode == ModeSingleFIFO {
		q, limit = 0, singleCap
	}
	if len(m.queues[q]) >= limit {
		m.counts[i].Refused++
		return ErrQueueFull
	}
	m.queues[q] = append(m.queues[q], lpModelEntry{r, now, i})
	m.counts[i].Queued++
	m.counts[i].Enqueued++
	return nil
}

func (m *lpModel) next() (Request, bool) {
	var e lpModelEntry
	if m.mode == ModeSingleFIFO {
		if len(m.queues[0]) == 0 {
			return Request{}, false
		}
		e, m.queues[0] = m.queues[0][0], m.queues[0][1:]
	} else {
		var candidates []int
		for _, kind := range []Kind{Transaction, Browsing} {
			for i, c := range m.classes {
				if c.Kind == kind && len(m.queues[i]) > 0 {
					candidates = append(candidates, i)
				}
			}
			if len(candidates) > 0 {
				break
			}
		}
		if len(candidates) == 0 {
			return Request{}, false
		}
		score := func(i int) float64 { return float64(len(m.queues[i])) * m.classes[i].Utility }
		slices.SortStableFunc(candidates, func(a, b int) int {
			switch {
			case score(a) != score(b):
				return cmpDesc(score(a), score(b))
			case m.classes[a].Utility != m.classes[b].Utility:
				return cmpDesc(m.classes[a].Utility, m.classes[b].Utility)
			}
			return a - b
		})
		i := candidates[0]
		q := m.queues[i]
		if m.classes[i].Kind == Browsing && m.lifo && m.mode == ModeLifoPri {
			e, m.queues[i] = q[len(q)-1], q[:len(q)-1]
		} else {
			e, m.queues[i] = q[0], q[1:]
		}
	}
	m.counts[e.class].Queued--
	m.counts[e.class].Dispatched++
	return e.r, true
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

func (m *lpModel) expire(now int64) []RequestID {
	if m.timeout <= 0 {
		return nil
	}
	type aged struct {
		e   lpModelEntry
		pos int
	}
	var old []aged
	for q := range m.queues {
		kept := m.queues[q][:0:0]
		for pos, e := range m.queues[q] {
			if now-e.at > m.timeout {
				old = append(old, aged{e, pos})
			} else {
				kept = append(kept, e)
			}
		}
		m.queues[q] = kept
	}
	// Oldest first; equal times by class order, then queue position.
	slices.SortStableFunc(old, func(a, b aged) int {
		switch {
		case a.e.at != b.e.at:
			return int(a.e.at - b.e.at)
		case m.mode != ModeSingleFIFO && a.e.class != b.e.class:
			return a.e.class - b.e.class
		}
		return a.pos - b.pos
	})
	var ids []RequestID
	for _, a := range old {
		m.counts[a.e.class].Queued--
		m.counts[a.e.class].Expired++
		ids = append(ids, a.e.r.ID)
	}
	return ids
}

// Random sequences of Enqueue, Next, SetUtilization and Expire, with small
// queues so that refusals happen, give the same requests, refusals and
// counters from LifoPri as from the naive model, in every mode.
func TestLifoPriMatchesModel(t *testing.T) {
	// Utilities chosen so that scores tie often (2 x 3 = 3 x 2 = 6, equal
	// utilities), and a clock in whole milliseconds so that waiting times
	// hit the timeout exactly: the tie rules are exercised, not just the
	// common case.
	classes := []Class{
		{Name: "b2", Kind: Browsing, Utility: 2, QueueCap: 6},
		{Name: "b3", Kind: Browsing, Utility: 3, QueueCap: 4},
		{Name: "b3bis", Kind: Browsing, Utility: 3, QueueCap: 4},
		{Name: "b6", Kind: Browsing, Utility: 6, QueueCap: 3},
		{Name: "t1", Kind: Transaction, Utility: 1, QueueCap: 4},
		{Name: "t2", Kind: Transaction, Utility: 2, QueueCap: 3},
		{Name: "t2bis", Kind: Transaction, Utility: 2, QueueCap: 2},
	}
	for _, mode := range []Mode{ModeLifoPri, ModeEightFIFO, ModeSingleFIFO} {
		for seed := range uint64(20) {
			cfg := LifoPriConfig{Classes: classes, Mode: mode, SingleCap: 12, QueueTimeout: 40 * time.Millisecond}
			p := newLifoPriT(t, cfg)
			m := newLpModel(cfg)
			rng := rand.New(rand.NewPCG(seed, uint64(mode)))
			now := int64(0)
			for step := range 2000 {
				now += rng.Int64N(3) * ms
				switch op := rng.IntN(10); {
				case op < 5:
					r := Request{ID: RequestID(step), Customer: classes[rng.IntN(len(classes))].Name}
					if rng.IntN(50) == 0 {
						r.Customer = "unknown"
					}
					got, want := p.Enqueue(r, now), m.enqueue(r, now, cfg.SingleCap)
					if !errors.Is(got, want) {
						t.Fatalf("%v seed %d step %d: Enqueue(%s) = %v, model %v", mode, seed, step, r.Customer, got, want)
					}
				case op < 9:
					got, gotOK := p.Next(now)
					want, wantOK := m.next()
					if got != want || gotOK != wantOK {
						t.Fatalf("%v seed %d step %d: Next = %+v %v, model %+v %v", mode, seed, step, got, gotOK, want, wantOK)
					}
				default:
					u := rng.Float64() * 1.1
					p.SetUtilization(u, now)
					if u > DefaultLifoUpper {
						m.lifo = true
					} else if u < DefaultLifoLower {
						m.lifo = false
					}
					var got []RequestID
					p.Expire(now, func(r Request) { got = append(got, r.ID) })
					if want := m.expire(now); !slices.Equal(got, want) {
						t.Fatalf("%v seed %d step %d: Expire = %v, model %v", mode, seed, step, got, want)
					}
				}
				snap := p.Snapshot()
				total := 0
				for i, want := range m.counts {
					want.LIFO = m.lifo && mode == ModeLifoPri && want.Kind == Browsing
					if snap[i] != want {
						t.Fatalf("%v seed %d step %d: snapshot %+v, model %+v", mode, seed, step, snap[i], want)
					}
					total += want.Queued
				}
				if p.Len() != total {
					t.Fatalf("%v seed %d step %d: Len %d, model %d", mode, seed, step, p.Len(), total)
				}
			}
		}
	}
}
