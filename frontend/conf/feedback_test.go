package conf

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
)

// defaultFeedback is the feedback section of a file without one.
func defaultFeedback() Feedback {
	classes := sched.DefaultFeedbackClasses()
	for i := range classes {
		classes[i].TargetQueue, classes[i].QueueCap, classes[i].ReserveCap = 50, 1000, 1000
	}
	return Feedback{
		Policy: sched.FeedbackConfig{Classes: classes, Period: 50 * time.Millisecond, TargetQueue: 50,
			Q0: 1, Q1: -0.75, History: 4, RefusePeriods: 3, LogLength: 100, Seed: 1, QueueTimeout: 10 * time.Second,
			MergeGain: 0.1, QualityGain: 0.1, Trees: 1, TreePath: sched.DefaultFeedbackTreePath, Utilization: 0.85, Gain: 4},
		Classifier: sched.FeedbackClassifierConfig{Fallback: "bronze", MaxSessions: 100_000, SessionIdle: 30 * time.Minute},
	}
}

// testdata/feedback.yaml, the commented example of a feedback listener,
// parses without warnings into what its comments say.
func TestFeedbackExampleParses(t *testing.T) {
	f, err := Load("testdata/feedback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ws := f.Check(); len(ws) != 0 {
		t.Errorf("the example draws warnings: %v", ws)
	}
	if f.Listeners[0].Policy != PolicyFeedback {
		t.Errorf("listener policy %q", f.Listeners[0].Policy)
	}
	p, c := f.Feedback.Policy, f.Feedback.Classifier
	if p.Trees != 3 || p.A != 0.0008 || p.B != 1e-8 || p.Merge != sched.MergePlanned || p.Q1 != -0.75 || p.QualityGain != 0.1 {
		t.Errorf("policy %+v", p)
	}
	if c.SessionCookie != "sid" || len(c.TransactionalPaths) != 2 || c.Fallback != "bronze" {
		t.Errorf("classifier %+v", c)
	}
	gold, silver := p.Classes[0], p.Classes[1]
	if gold.Weight != 3 || gold.Hosts[1] != "*.gold.example" || gold.Cookies[0] != "tier=gold" ||
		silver.Subnets[0] != netip.MustParsePrefix("198.18.1.0/24") || silver.Paths[0] != "/api*" || silver.TargetQueue != 50 {
		t.Errorf("classes %+v", p.Classes)
	}
	// What the file configures, sched accepts.
	if _, err := sched.NewFeedback(p); err != nil {
		t.Errorf("NewFeedback: %v", err)
	}
	c.Classes = p.Classes
	if _, err := sched.NewFeedbackClassifier(c); err != nil {
		t.Errorf("NewFeedbackClassifier: %v", err)
	}
}

// Bad feedback settings are reported with file, line and key.
func TestFeedbackBadValues(t *testing.T) {
	lf := minimal + "listeners: [{vip: 198.18.0.100, port: 80, policy: feedback}]\n"
	lf = strings.Replace(lf, minimalListeners, "", 1)
	for _, tc := range []struct{ text, want string }{
		{"feedback: {q1: 0.5}\n", `front.yaml:5: feedback.q1: 0.5 makes the loop unstable: need -2 < q1 < 0`},
		{"feedback:\n  q0: -1\n", `front.yaml:6: feedback.q0: -1 with q1 -0.75 makes the loop unstable`},
		{"feedback: {period: 10us}\n", `front.yaml:5: feedback.period: 10µs is below 1ms`},
		{"feedback: {merge: fair}\n", `front.yaml:5: feedback.merge: "fair" is not a merge (known: planned, per-request)`},
		{"feedback: {queue_timeout: 100ms}\n", `front.yaml:5: feedback.queue_timeout: 100ms must exceed refuse_periods x period (150ms)`},
		{"feedback: {session_cookie: \"a=b\"}\n", `front.yaml:5: feedback.session_cookie: "a=b" is not a cookie name`},
		{"feedback: {content: {trees: 0}}\n", `front.yaml:5: feedback.content.trees: 0 is out of range 1..255`},
		{"feedback: {content: {target_utilization: 1.5}}\n", `front.yaml:5: feedback.content.target_utilization: 1.5 is above 1`},
		{"feedback: {content: {a: -1}}\n", `front.yaml:5: feedback.content.a: must be >= 0`},
		{"feedback: {content: {quality_gain: 0}}\n", `front.yaml:5: feedback.content.quality_gain: 0 is not in (0, 1]; a negative value serves every class at one quality`},
		{"feedback: {content: {quality_gain: 2}}\n", `front.yaml:5: feedback.content.quality_gain: 2 is not in (0, 1]`},
		{"feedback: {content: {g_step: hourly}}\n", `front.yaml:5: feedback.content.g_step: "hourly": want dispatch (G moves with each dispatch) or period`},
		{"feedback: {content: {tree_path: t}}\n", `front.yaml:5: feedback.content.tree_path: "t" must start with / (e.g. "/tree{tree}{path}")`},
		{"feedback: {content: {tree_path: \"/tree{tree}\"}}\n", `front.yaml:5: feedback.content.tree_path: "/tree{tree}" must name {path} once`},
		{"feedback: {fallback: platinum}\n", `front.yaml:5: feedback.fallback: "platinum" is not one of the feedback classes`},
		{"feedback: {classes: []}\n", `front.yaml:5: feedback.classes: at least one class is required`},
		{"feedback:\n  classes:\n    - name: a\n", `front.yaml:7: feedback.classes[0].weight: required`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1}\n    - {name: a, weight: 2}\n", `front.yaml:8: feedback.classes[1].name: "a" is already the name of feedback.classes[0]`},
		{"feedback:\n  classes:\n    - {name: a, weight: 0}\n", `front.yaml:7: feedback.classes[0].weight: must be > 0`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1, subnets: [10.0.0.0/33]}\n", `front.yaml:7: feedback.classes[0].subnets[0]: "10.0.0.0/33" is not a subnet`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1, cookies: [tier]}\n", `front.yaml:7: feedback.classes[0].cookies[0]: "tier" is not "name=value"`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1, paths: [api]}\n", `front.yaml:7: feedback.classes[0].paths[0]: "api" must start with "/"`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1, hosts: [\"a.*.example\"]}\n", `front.yaml:7: feedback.classes[0].hosts[0]:`},
		{"feedback:\n  classes:\n    - {name: a, weight: 1, colour: red}\n", `front.yaml:7: feedback.classes[0]: unknown key "colour"`},
		{"feedback: {speed: 1}\n", `front.yaml:5: feedback: unknown key "speed"`},
	} {
		_, err := Parse("front.yaml", []byte(lf+tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.text, err, tc.want)
		}
	}
	_, err := Parse("front.yaml", []byte(strings.Replace(minimal, minimalListeners,
		"listeners: [{vip: 198.18.0.100, port: 81, policy: feedback, queue_timeout: 1s}]\n", 1)))
	if err == nil || !strings.Contains(err.Error(), "feedback listeners share feedback.queue_timeout") {
		t.Errorf("listener queue_timeout on a feedback listener: %v", err)
	}
}

func TestFeedbackWarnings(t *testing.T) {
	warnings := func(text string) string {
		t.Helper()
		f, err := Parse("front.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, w := range f.Check() {
			s = append(s, w.String())
		}
		return strings.Join(s, "\n")
	}
	if w := warnings(minimal + "feedback: {period: 50ms}\n"); !strings.Contains(w, "front.yaml:5: feedback: no listener has policy feedback") {
		t.Errorf("unused section: %q", w)
	}
	fb := strings.Replace(minimal, minimalListeners, "listeners: [{vip: 198.18.0.100, port: 80, policy: feedback}]\n", 1)
	w := warnings(fb + "feedback:\n  content: {trees: 3}\n")
	if !strings.Contains(w, "front.yaml:6: feedback.content: 3 content trees but a and b are 0") ||
		!strings.Contains(w, `every request goes to "bronze"`) {
		t.Errorf("feedback warnings: %q", w)
	}
}

// A negative quality_gain is the way to serve every class at one quality
// (sched reads 0 as its default), and sched accepts it.
func TestFeedbackNegativeQualityGainMeansOneQualityForAll(t *testing.T) {
	lf := minimal + "listeners: [{vip: 198.18.0.100, port: 80, policy: feedback}]\n"
	lf = strings.Replace(lf, minimalListeners, "", 1)
	f, err := Parse("front.yaml", []byte(lf+"feedback: {content: {quality_gain: -1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := f.Feedback.Policy.QualityGain; g != -1 {
		t.Fatalf("quality_gain %v, want -1", g)
	}
	if _, err := sched.NewFeedback(f.Feedback.Policy); err != nil {
		t.Error(err)
	}
}

// g_step: period keeps G to the published once-a-period law; the default
// moves it with each dispatch.
func TestFeedbackGStep(t *testing.T) {
	lf := minimal + "listeners: [{vip: 198.18.0.100, port: 80, policy: feedback}]\n"
	lf = strings.Replace(lf, minimalListeners, "", 1)
	for text, want := range map[string]bool{"": false, "feedback: {content: {g_step: dispatch}}\n": false, "feedback: {content: {g_step: period}}\n": true} {
		f, err := Parse("front.yaml", []byte(lf+text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := f.Feedback.Policy.GStepPerPeriod; got != want {
			t.Errorf("%q: GStepPerPeriod %v, want %v", text, got, want)
		}
	}
}
