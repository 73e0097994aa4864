package conf

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// node parses text as one YAML value.
func node(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func errorTexts(d *decoder) string {
	var s []string
	for _, e := range d.errs {
		s = append(s, e.Path+": "+e.Message)
	}
	return strings.Join(s, "; ")
}

// scalars hands over every single value of a list with its own path and
// line, reports the items that are not single values, and does nothing
// for an absent list.
func TestScalarsWalksAList(t *testing.T) {
	d := &decoder{lines: map[string]int{}}
	var got []string
	d.scalars(node(t, "[a.example, {x: 1}, \"b\"]"), "c.hosts", func(s string, line int, path string) {
		got = append(got, s+"@"+path)
		if line != 1 {
			t.Errorf("%s on line %d, want 1", path, line)
		}
	})
	if strings.Join(got, " ") != "a.example@c.hosts[0] b@c.hosts[2]" {
		t.Errorf("items %q", got)
	}
	if e := errorTexts(d); e != "c.hosts[1]: expected a single value, found a mapping" {
		t.Errorf("errors %q", e)
	}
	d.scalars(nil, "c.cookies", func(string, int, string) { t.Error("an item of an absent list") })
	d.scalars(node(t, "~"), "c.cookies", func(string, int, string) { t.Error("an item of a null list") })
}

// number and duration refuse the same signs in the same words; signed
// takes either sign; every refusal keeps the default.
func TestNumbersAndDurationsShareTheSignRule(t *testing.T) {
	for _, c := range []struct {
		text      string
		positive  bool
		wantNum   float64
		wantError string
	}{
		{"2.5", true, 2.5, ""},
		{"0", true, 7, "must be > 0"},
		{"0", false, 0, ""},
		{"-1", false, 7, "must be >= 0"},
		{".inf", false, 7, "is not a number"},
		{"abc", false, 7, "is not a number"},
	} {
		d := &decoder{lines: map[string]int{}}
		if got := d.number(node(t, c.text), "x", 7, c.positive); got != c.wantNum || !strings.Contains(errorTexts(d), c.wantError) ||
			(c.wantError == "") != (len(d.errs) == 0) {
			t.Errorf("number %s (positive %v) = %v, errors %q; want %v, %q", c.text, c.positive, got, errorTexts(d), c.wantNum, c.wantError)
		}
	}
	for _, c := range []struct {
		text      string
		positive  bool
		want      time.Duration
		wantError string
	}{
		{"10ms", true, 10 * time.Millisecond, ""},
		{"0s", true, time.Second, "must be > 0"},
		{"0s", false, 0, ""},
		{"-1s", false, time.Second, "must be >= 0"},
	} {
		d := &decoder{lines: map[string]int{}}
		if got := d.duration(node(t, c.text), "x", time.Second, c.positive); got != c.want || !strings.Contains(errorTexts(d), c.wantError) ||
			(c.wantError == "") != (len(d.errs) == 0) {
			t.Errorf("duration %s (positive %v) = %v, errors %q; want %v, %q", c.text, c.positive, got, errorTexts(d), c.want, c.wantError)
		}
	}
	d := &decoder{lines: map[string]int{}}
	if got := d.signed(node(t, "-1.5"), "q1", 3); got != -1.5 || len(d.errs) != 0 {
		t.Errorf("signed -1.5 = %v, errors %q", got, errorTexts(d))
	}
	if got := d.signed(node(t, "x"), "q1", 3); got != 3 || !strings.Contains(errorTexts(d), "is not a number") {
		t.Errorf("signed x = %v, errors %q", got, errorTexts(d))
	}
}
