package session

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestStagePathsAndNames(t *testing.T) {
	for s := Main; s < Exit; s++ {
		got, ok := StageForPath(s.Path() + "?q=1")
		if !ok || got != s {
			t.Errorf("StageForPath(%q) = %v, %v; want %v", s.Path(), got, ok, s)
		}
	}
	if Exit.Path() != "" || Exit.String() != "exit" || Stage(42).String() != "Stage(42)" {
		t.Errorf("Exit path %q name %q, Stage(42) %q", Exit.Path(), Exit.String(), Stage(42).String())
	}
	if _, ok := StageForPath("/cart"); ok {
		t.Error("StageForPath accepted /cart")
	}
	if Details.Transactional() || !Login.Transactional() || !Confirm.Transactional() || Exit.Transactional() {
		t.Error("Transactional classes wrong")
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Model)
		inErr string
	}{
		{"negative", func(m *Model) { m.Transitions[Search][Browse] = -0.1; m.Transitions[Search][Exit] = 0.3 }, "Transitions[search][browse] = -0.1"},
		{"NaN", func(m *Model) { m.Transitions[Login][Main] = math.NaN() }, "Transitions[login][main]"},
		{"row sum", func(m *Model) { m.Transitions[Payment][Exit] += 0.01 }, "row payment sums to"},
		{"trap", func(m *Model) {
			m.Transitions[Shipping] = [NumStages]float64{Payment: 1}
			m.Transitions[Payment] = [NumStages]float64{Shipping: 1}
		}, "row shipping: no path from shipping leads to exit"},
		{"start", func(m *Model) { m.Start = Exit }, "Start exit"},
		{"timeout", func(m *Model) { m.TimeoutMean = 0 }, "TimeoutMean"},
		{"think", func(m *Model) { m.ThinkMean = -1 }, "ThinkMean"},
		{"retries", func(m *Model) { m.Retries = -1 }, "Retries"},
		{"abandon", func(m *Model) { m.AbandonProb = 1.5 }, "AbandonProb"},
	}
	for _, c := range cases {
		m := DefaultModel()
		c.edit(&m)
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), c.inErr) {
			t.Errorf("%s: Validate() = %v, want error containing %q", c.name, err, c.inErr)
		}
	}
	if err := DefaultModel().Validate(); err != nil {
		t.Fatalf("DefaultModel invalid: %v", err)
	}
}

// tinyModel is main -> browse (1/2) or exit (1/2); browse -> browse (1/4)
// or exit (3/4). By hand: visits to browse from main are 1/2 * 1/(1-1/4)
// = 2/3, so the length is 5/3; reaching browse has probability 1/2. The
// unused pages exit at once.
func tinyModel() Model {
	m := DefaultModel()
	for s := Main; s < Exit; s++ {
		m.Transitions[s] = [NumStages]float64{Exit: 1}
	}
	m.Transitions[Main] = [NumStages]float64{Browse: 0.5, Exit: 0.5}
	m.Transitions[Browse] = [NumStages]float64{Browse: 0.25, Exit: 0.75}
	return m
}

func TestStatsTinyChain(t *testing.T) {
	m := tinyModel()
	st := m.Stats()
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %.15g, want %.15g", what, got, want)
		}
	}
	near("Visits[main]", st.Visits[Main], 1)
	near("Visits[browse]", st.Visits[Browse], 2.0/3)
	near("Visits[search]", st.Visits[Search], 0)
	near("Length", st.Length, 5.0/3)
	// L = 1 + B, B = 0 w.p. 1/2, else geometric on {1,2,..} with
	// success 3/4: E[B^2] = 1/2 * (2-p)/p^2 = 1/2 * (5/4)/(9/16) = 10/9.
	// Var L = Var B = 10/9 - 4/9 = 2/3.
	near("LengthVar", st.LengthVar, 2.0/3)
	near("Mix[main]", st.Mix[Main], 0.6)
	near("Mix[browse]", st.Mix[Browse], 0.4)
	near("Reach[browse]", st.Reach[Browse], 0.5)
	near("Reach[confirm]", st.Reach[Confirm], 0)
	near("Transactional", st.Transactional, 0)
	// One attempt, no retry: a page succeeds w.p. 1-q = 0.8. Completing
	// = 1/2 * 0.8 + 1/2 * 0.8 * E[0.8^B | B>=1], where E[s^B | B>=1] =
	// 3/4 s / (1 - s/4) = 0.6/0.8 = 0.75: 0.4 + 0.3 = 0.7.
	m.Retries = 0
	near("AbandonRate", m.AbandonRate(0.2), 0.3)
	m.Retries, m.AbandonProb = 2, 0.5
	near("PageSuccess", m.PageSuccess(0.2), 0.8*(1+0.1+0.01))
}

func TestStatsSingularIsNaN(t *testing.T) {
	m := DefaultModel()
	m.Transitions[Confirm] = [NumStages]float64{Confirm: 1}
	if st := m.Stats(); !math.IsNaN(st.Length) {
		t.Errorf("Length of a chain that never ends = %v, want NaN", st.Length)
	}
}

// TestDefaultModelStats pins the figures quoted in the package comment
// and the ranges the brief asks for.
func TestDefaultModelStats(t *testing.T) {
	st := DefaultModel().Stats()
	if st.Length < 8 || st.Length > 12 {
		t.Errorf("mean session length %.3f outside [8, 12]", st.Length)
	}
	if c := st.Reach[Confirm]; c < 0.05 || c > 0.10 {
		t.Errorf("sessions reaching confirm %.4f outside [5%%, 10%%]", c)
	}
	if st.Transactional < 0.02 || st.Transactional > 0.08 {
		t.Errorf("transactional share %.4f outside [2%%, 8%%]", st.Transactional)
	}
	doc := []struct {
		page               Stage
		visits, mix, reach float64 // as printed in doc.go
	}{
		{Main, 1.294, .141, 1}, {Browse, 2.679, .291, .772}, {Search, 1.905, .207, .686},
		{Details, 2.868, .312, .769}, {Login, .169, .018, .162}, {Shipping, .115, .012, .108},
		{Payment, .092, .010, .087}, {Confirm, .078, .0085, .077},
	}
	sum := 0.0
	for _, d := range doc {
		if math.Abs(st.Visits[d.page]-d.visits) > 0.0006 || math.Abs(st.Mix[d.page]-d.mix) > 0.0006 ||
			math.Abs(st.Reach[d.page]-d.reach) > 0.0006 {
			t.Errorf("%v: visits %.4f mix %.4f reach %.4f; doc says %v %v %v",
				d.page, st.Visits[d.page], st.Mix[d.page], st.Reach[d.page], d.visits, d.mix, d.reach)
		}
		sum += st.Mix[d.page]
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("mix sums to %v", sum)
	}
	if math.Abs(st.Length-9.20) > 0.005 || math.Abs(math.Sqrt(st.LengthVar)-8.2) > 0.05 ||
		math.Abs(st.Transactional-0.049) > 0.0005 {
		t.Errorf("length %.4f sd %.4f transactional %.4f differ from doc.go", st.Length, math.Sqrt(st.LengthVar), st.Transactional)
	}
}

func TestDeterminism(t *testing.T) {
	m := DefaultModel()
	a := Generate(&m, rand.New(rand.NewPCG(7, 8)), 500)
	b := Generate(&m, rand.New(rand.NewPCG(7, 8)), 500)
	c := Generate(&m, rand.New(rand.NewPCG(7, 9)), 500)
	if !equalSessions(a, b) {
		t.Fatal("same seed gave different sessions")
	}
	if equalSessions(a, c) {
		t.Fatal("different seeds gave the same 500 sessions")
	}
}

func equalSessions(a, b []LogSession) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i].Requests) != len(b[i].Requests) {
			return false
		}
		for j := range a[i].Requests {
			if a[i].Requests[j] != b[i].Requests[j] {
				return false
			}
		}
	}
	return true
}
