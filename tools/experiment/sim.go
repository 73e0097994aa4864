package experiment

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/session"
)

// simSession is one simulated user.
type simSession struct {
	walk    *session.Session
	rng     *rand.Rand // the session's own stream, shared with walk
	counted bool       // arrived in [Warmup, Duration)
	over    bool       // exited, abandoned or dropped
}

// attempt is one request sent by a session: the first try of a page or
// a retry. The client and the server each decide its fate on their own.
type attempt struct {
	sess    *simSession
	page    session.Stage
	sent    int64 // ns
	service int64 // ns, drawn when sent
	gaveUp  bool  // the client stopped waiting
	served  bool  // a back-end finished it
}

// simulator is the state of one run. Everything happens on one goroutine
// in virtual time, so a run is a pure function of its Config.
type simulator struct {
	cfg      Config
	policy   *sched.LifoPri
	meter    *sched.UtilizationMeter
	events   eventQueue
	now      int64
	slots    int
	busy     int
	nextID   sched.RequestID
	waiting  map[sched.RequestID]*attempt // admitted, not yet dispatched
	arrivals *rand.Rand                   // session arrival times only
	sessions uint64                       // sessions started so far
	active   int                          // counted sessions not yet over
	warmup   int64
	end      int64
	res      Result
	rts      []int64 // server-side response times of counted attempts, ns
	ticks    int
	lifo     int
}

// Run simulates cfg and returns its result.
func Run(cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	policy, err := sched.NewLifoPri(sched.LifoPriConfig{Mode: cfg.Mode})
	if err != nil {
		return Result{}, err
	}
	s := &simulator{
		cfg:      cfg,
		policy:   policy,
		meter:    sched.NewUtilizationMeter(cfg.Slots(), 0),
		slots:    cfg.Slots(),
		waiting:  make(map[sched.RequestID]*attempt),
		arrivals: rand.New(rand.NewPCG(cfg.Seed, 0x5e55_1075)),
		warmup:   int64(cfg.Warmup),
		end:      int64(cfg.Duration),
	}
	s.res.Policy = cfg.Mode.String()
	s.res.Load = cfg.Load
	s.res.CapacityRPS = cfg.Capacity()
	s.res.OfferedRPS = cfg.Load * s.res.CapacityRPS
	s.events.push(event{at: 0, kind: sessionArrives})
	s.events.push(event{at: int64(cfg.UtilInterval), kind: utilTick})
	s.loop()
	s.finish()
	return s.res, nil
}

// loop handles events until every counted session is over.
func (s *simulator) loop() {
	gap := 1 / s.cfg.SessionRate() // mean seconds between sessions
	for s.events.len() > 0 {
		e := s.events.pop()
		s.now = e.at
		if s.now >= s.end && s.active == 0 {
			return
		}
		switch e.kind {
		case sessionArrives:
			s.startSession()
			next := s.now + int64(s.arrivals.ExpFloat64()*gap*float64(time.Second))
			s.events.push(event{at: next, kind: sessionArrives})
		case pageRequested:
			s.request(e.sess)
		case clientGivesUp:
			s.giveUp(e.att)
		case serviceDone:
			s.complete(e.att)
		case utilTick:
			s.policy.SetUtilization(s.meter.Interval(s.now), s.now)
			if s.now > s.warmup && s.now <= s.end {
				s.ticks++
				if s.policy.LIFO() {
					s.lifo++
				}
			}
			s.events.push(event{at: s.now + int64(s.cfg.UtilInterval), kind: utilTick})
		}
	}
}

func (s *simulator) startSession() {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, s.sessions))
	s.sessions++
	ss := &simSession{walk: session.NewSession(&s.cfg.Model, rng), rng: rng}
	if s.now >= s.warmup && s.now < s.end {
		ss.counted = true
		s.active++
		s.res.Sessions++
	}
	s.request(ss)
}

// request sends the session's next page, or ends the session.
func (s *simulator) request(ss *simSession) {
	page, ok := ss.walk.Next()
	if !ok {
		s.sessionOver(ss)
		return
	}
	// Draw patience and service time whatever happens next, so the
	// session's random stream does not depend on the policy's choices.
	patience := int64(ss.walk.Patience())
	service := int64(ss.rng.ExpFloat64() * float64(s.cfg.ServiceMean[page]))
	att := &attempt{sess: ss, page: page, sent: s.now, service: service}
	s.nextID++
	req := sched.Request{ID: s.nextID, Customer: page.String(), Path: page.Path(), Arrival: s.now}
	if err := s.policy.Enqueue(req, s.now); err != nil {
		if !errors.Is(err, sched.ErrQueueFull) {
			panic(err) // every page name is a class of DefaultClasses
		}
		// The front-end answers 503 at once; the user takes it as the
		// shop being down and leaves.
		if ss.counted {
			s.res.Requests.Dropped++
		}
		s.abandon(ss, page)
		return
	}
	s.waiting[req.ID] = att
	s.events.push(event{at: s.now + patience, kind: clientGivesUp, att: att})
	s.dispatch()
}

// dispatch hands waiting requests to free slots in the policy's order.
func (s *simulator) dispatch() {
	for s.busy < s.slots {
		req, ok := s.policy.Next(s.now)
		if !ok {
			return
		}
		att := s.waiting[req.ID]
		delete(s.waiting, req.ID)
		s.busy++
		s.meter.Start(s.now)
		s.events.push(event{at: s.now + att.service, kind: serviceDone, att: att})
	}
}

func (s *simulator) complete(att *attempt) {
	s.busy--
	s.meter.Done(s.now)
	att.served = true
	ss := att.sess
	inWindow := s.now >= s.warmup && s.now < s.end
	if ss.counted {
		s.rts = append(s.rts, s.now-att.sent)
	}
	if att.gaveUp {
		if ss.counted {
			s.res.Wasted++
		}
	} else {
		if inWindow {
			s.res.ThroughputRPS++ // divided by the window length in finish
		}
		if ss.counted {
			s.res.Requests.Completed++
			s.res.PerClass[att.page]++
		}
		s.events.push(event{at: s.now + int64(ss.walk.Think()), kind: pageRequested, sess: ss})
	}
	s.dispatch()
}

// giveUp is the client's patience running out. The request stays where
// it is: the server does not learn that nobody waits for it any more.
func (s *simulator) giveUp(att *attempt) {
	if att.served {
		return
	}
	att.gaveUp = true
	ss := att.sess
	if ss.counted {
		s.res.Requests.TimedOut++
	}
	if ss.walk.TimedOut() {
		if ss.counted {
			s.res.Retries++
		}
		s.request(ss) // the user presses reload at once
		return
	}
	s.abandon(ss, att.page)
}

// abandon ends a session that left on page `at` and counts the pages it
// would still have visited, by continuing its Markov walk from there
// without sending anything.
func (s *simulator) abandon(ss *simSession, at session.Stage) {
	if ss.counted {
		for page := s.cfg.Model.NextStage(ss.rng, at); page != session.Exit; page = s.cfg.Model.NextStage(ss.rng, page) {
			s.res.Requests.NotGenerated++
		}
	}
	s.sessionOver(ss)
}

func (s *simulator) sessionOver(ss *simSession) {
	if ss.over {
		return
	}
	ss.over = true
	if ss.counted {
		s.active--
	}
}

// finish turns the counters into the Result's derived figures.
func (s *simulator) finish() {
	r := &s.res
	r.ThroughputRPS /= (time.Duration(s.end - s.warmup)).Seconds()
	total := float64(r.Requests.Total())
	if total > 0 {
		r.CompletedPct = 100 * float64(r.Requests.Completed) / total
		r.TimedOutPct = 100 * float64(r.Requests.TimedOut) / total
		r.DroppedPct = 100 * float64(r.Requests.Dropped) / total
		r.NotGeneratedPct = 100 * float64(r.Requests.NotGenerated) / total
	}
	if s.ticks > 0 {
		r.LIFOFraction = float64(s.lifo) / float64(s.ticks)
	}
	slices.Sort(s.rts)
	r.sortedRT = s.rts
	if n := len(s.rts); n > 0 {
		sum := 0.0
		for _, v := range s.rts {
			sum += float64(v)
		}
		r.MeanRTSeconds = sum / float64(n) / 1e9
	}
	r.CCDF = ccdfGrid(s.rts)
}
