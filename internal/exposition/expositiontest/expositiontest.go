// Package expositiontest reads /metrics back in tests the way Prometheus
// does: with the text parser of github.com/prometheus/common/expfmt, and
// with `promtool check metrics` where promtool is installed.
package expositiontest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads the text exposition format, failing t on any error.
func Parse(t testing.TB, text []byte) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, text)
	}
	return fams
}

// Scrape GETs url, which must answer 200 in the text format, and parses
// the answer. It returns the body too, for promtool.
func Scrape(t testing.TB, client *http.Client, url string) (Families, []byte) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s\n%s", url, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape %s: content type %q, want the text format", url, ct)
	}
	return Parse(t, body), body
}

// Gather collects c in a pedantic registry (which checks that every
// metric matches a described family and that families are consistent),
// renders the text format and parses it back.
func Gather(t testing.TB, c prometheus.Collector) (Families, []byte) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return Parse(t, b.Bytes()), b.Bytes()
}

// Metric returns the sample of family name with exactly the given labels
// ("key", "value", ...) and checks the family's type; it fails t if
// either is not there.
func (f Families) Metric(t testing.TB, name string, typ dto.MetricType, labels ...string) *dto.Metric {
	t.Helper()
	mf := f[name]
	if mf == nil {
		t.Fatalf("no family %s", name)
		return nil
	}
	if mf.GetType() != typ {
		t.Fatalf("%s is a %v, want a %v", name, mf.GetType(), typ)
	}
	for _, m := range mf.GetMetric() {
		if matches(m, labels) {
			return m
		}
	}
	t.Fatalf("no %s%s among %d samples", name, labelString(labels), len(mf.GetMetric()))
	return nil
}

// Counter and Gauge return a sample's value.
func (f Families) Counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return f.Metric(t, name, dto.MetricType_COUNTER, labels...).GetCounter().GetValue()
}

func (f Families) Gauge(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return f.Metric(t, name, dto.MetricType_GAUGE, labels...).GetGauge().GetValue()
}

// Histogram returns a histogram sample.
func (f Families) Histogram(t testing.TB, name string, labels ...string) *dto.Histogram {
	t.Helper()
	return f.Metric(t, name, dto.MetricType_HISTOGRAM, labels...).GetHistogram()
}

// Bucket is the cumulative count of h's bucket with upper bound le; it
// fails t if h has no such bucket.
func Bucket(t testing.TB, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%g", le)
	return 0
}

// Labels returns the values label takes across family name's samples.
func (f Families) Labels(name, label string) []string {
	var vs []string
	for _, m := range f[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				vs = append(vs, lp.GetValue())
			}
		}
	}
	slices.Sort(vs)
	return vs
}

func matches(m *dto.Metric, labels []string) bool {
	if len(m.GetLabel())*2 != len(labels) {
		return false
	}
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func labelString(labels []string) string {
	var parts []string
	for i := 0; i+1 < len(labels); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Promtool runs `promtool check metrics` on a scrape and fails t on any
// finding. Without promtool the check is skipped, except under CI
// (CI=true), whose .ci/run installs it: there a missing promtool fails.
func Promtool(t testing.TB, scrape []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (Debian package prometheus; .ci/run installs it)")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
