package demo

import (
	"fmt"
	"io"
	"time"

	"github.com/qsplice/qsplice/internal/progress"
)

// The stages of a guaranteed-rates run, each a progress line ("[k/N]
// label, 40s in, about 30s left") as it starts. The load, the long part,
// is a warm-up stage and then a stage per slice of the measured window,
// so that a run of minutes says where it is while qsplice-load runs.
// Weights are expected seconds: the load's are its own length; a
// 5-back-end lab without nginx came up in 2.8 s and went down in 0.6 s on
// the 2-core lab host at load 16 (qsplice-lab up -backends 5 -nginx=false),
// and the three downloads take a second or two.
const (
	labUpSeconds     = 3
	downloadsSeconds = 2
	labDownSeconds   = 1
	// minSlice is the shortest measured slice with a line of its own;
	// longer runs have ten.
	minSlice = 10 * time.Second
)

// stage is one progress line and its expected weight.
type stage struct {
	label  string
	weight float64
	at     time.Duration // load stages: when the stage starts, from the load's start
}

// runStages are a run's stages in order.
type runStages struct {
	lab, before stage
	hasBefore   bool
	load        []stage
	end         stage
}

// stages plans the progress lines of a run of lab name offering offered
// req/s in all; keep: the lab is left up at the end.
func (g *GuaranteeConfig) stages(name string, hasBefore bool, offered float64, keep bool) runStages {
	s := runStages{
		lab: stage{label: fmt.Sprintf("building lab %q: %d back-ends x %d concurrent, %v service time, credit scheduler",
			name, g.Backends, g.Capacity, g.ServiceTime), weight: labUpSeconds},
		hasBefore: hasBefore,
		before:    stage{label: g.BeforeLabel, weight: downloadsSeconds},
		end:       stage{label: "tearing the lab down", weight: labDownSeconds},
	}
	if keep {
		s.end = stage{label: "leaving the lab up"}
	}
	flood := ""
	if g.Flood != "" {
		flood = fmt.Sprintf(", %s floods at %.0fx", g.Flood, g.FloodFactor)
	}
	s.load = append(s.load, stage{label: fmt.Sprintf("offering %.0f req/s (%.1fx each reservation%s) for %v after a %v warm-up",
		offered, g.Offer, flood, g.Duration, g.Warmup), weight: g.Warmup.Seconds()})
	slice := max(minSlice, (g.Duration / 10).Round(time.Second))
	for at := time.Duration(0); at < g.Duration; at += slice {
		s.load = append(s.load, stage{label: fmt.Sprintf("load: %v of %v measured", at, g.Duration),
			weight: min(slice, g.Duration-at).Seconds(), at: g.Warmup + at})
	}
	return s
}

// progress counts s's stages, printing to w (nil: nothing) with the
// clock now (nil: time.Now).
func (s runStages) progress(w io.Writer, now func() time.Time) *progress.Progress {
	n, total := 2+len(s.load), s.lab.weight+s.end.weight
	if s.hasBefore {
		n, total = n+1, total+s.before.weight
	}
	for _, l := range s.load {
		total += l.weight
	}
	p := progress.New(w, "demo", n, total)
	if now != nil {
		p.WithClock(now)
	}
	return p
}

// stepLoad steps p through the load's stages at their times from now,
// until stop is closed (the load is over: the stages not reached yet are
// left out).
func stepLoad(p *progress.Progress, load []stage, stop <-chan struct{}) {
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, l := range load {
		timer.Reset(time.Until(start.Add(l.at)))
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		p.Step(l.label, l.weight)
	}
}
