// Package exposition serves both daemons' /metrics: a Prometheus
// registry holding the daemon's own collector (a custom one that turns a
// status snapshot into constant metrics at scrape time, so counting
// stays in the engines' plain counters and costs the packet path
// nothing), qsplice_build_info, and the standard process and Go runtime
// collectors.
package exposition

import (
	qversion "github.com/qsplice/qsplice/internal/version"
	"net/http"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAdminPort is the admin port (/status, /metrics) both daemons'
// examples and the lab use. 9100, used before, is node_exporter's, and
// Prometheus' list of default exporter ports has no free number left in
// 9100-9999; 7404 sits next to the control protocol's 7400, is in no
// exporter's default or /etc/services, and is not among the ports DDS
// (the other user of 74xx) picks for its first domain.
const DefaultAdminPort = 7404

// NewRegistry returns a registry with own registered next to
// qsplice_build_info and the process and Go collectors.
func NewRegistry(own prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(own, BuildInfo(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	return reg
}

// Handler serves reg in the text (or a negotiated) exposition format. A
// collector that cannot take its snapshot (an event loop that does not
// answer) fails the whole scrape with an HTTP error instead of serving a
// partial one that would read as counters gone back to nothing.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// BuildInfo is qsplice_build_info: always 1, with the version (what
// -version prints: the Makefile's git describe, else the build's own
// record), VCS revision and Go version of the running binary as labels,
// so a dashboard can say which build a daemon runs.
func BuildInfo() prometheus.Collector {
	version, revision := qversion.String(), "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qsplice_build_info",
		Help: "Which build is running: always 1, with the version, VCS revision and Go version as labels.",
		ConstLabels: prometheus.Labels{
			"version": version, "revision": revision, "goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}

// Family is one metric family of a snapshot collector: its description
// and type, the label names fixed, the values supplied per scrape.
type Family struct {
	Desc *prometheus.Desc
	Type prometheus.ValueType
}

// NewFamily describes a family of the given type and label names.
func NewFamily(name, help string, typ prometheus.ValueType, labels ...string) Family {
	return Family{Desc: prometheus.NewDesc(name, help, labels, nil), Type: typ}
}

// Emit sends one sample of f with the given label values.
func (f Family) Emit(ch chan<- prometheus.Metric, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(f.Desc, f.Type, v, labels...)
}

// Describe sends every family's description.
func Describe(ch chan<- *prometheus.Desc, fams ...*Family) {
	for _, f := range fams {
		ch <- f.Desc
	}
}
