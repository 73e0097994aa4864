package frontend

import (
	"strings"
	"testing"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/splice"
)

// The limits a configuration file sets reach /metrics as configured (0
// for a limit turned off, the engine's default for one left out), with
// what the engine counted against them.
func TestLimitsInMetrics(t *testing.T) {
	f, err := conf.Parse("front.yaml", []byte(`link: {interface: eth0}
handoff: 198.18.0.101
control: {listen: 198.18.0.2:7400, key_file: k}
listeners: [{vip: 198.18.0.100, port: 80, policy: fifo, queue_timeout: 4s}]
tcp:
  max_flows_per_source: 0
  max_ports_per_source: 99
  flow_lifetime: 20s
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fromFile(f)
	if cfg.MaxFlowsPerSource >= 0 || cfg.MaxPortsPerSource != 99 || cfg.Listeners[0].QueueTimeout.Seconds() != 4 {
		t.Fatalf("config %+v", cfg)
	}
	if cc := ControllerConfig(cfg); cc.QueueTimeout != conf.DefaultFIFOQueueTimeout || cc.Listeners[0].QueueTimeout.Seconds() != 4 {
		t.Errorf("controller queue timeouts %v, %+v", cc.QueueTimeout, cc.Listeners)
	}
	es := splice.FrontEndStats{Flows: 12, Sources: 3, HandoffPorts: 5, RefusedSYNSource: 7, RefusedPortsSource: 2,
		HeadDeadlineFreed: 4, LifetimeExpired: 6, HalfClosedReleased: 8, Evicted: 9, TablesRebuilt: 1}
	st := Status{Limits: limitsStatus(&cfg, &es), Drops: map[string]uint64{}}
	m := renderMetrics(t, &st)
	for _, want := range []string{
		`qsplice_frontend_limit{limit="max_flows"} 200000`,
		`qsplice_frontend_limit{limit="max_flows_per_source"} 0`,
		`qsplice_frontend_limit{limit="max_ports_per_source"} 99`,
		`qsplice_frontend_limit{limit="flow_lifetime"} 20`,
		`qsplice_frontend_limit{limit="half_close_timeout"} 30`,
		`qsplice_frontend_sources 3`,
		`qsplice_frontend_handoff_ports 5`,
		`qsplice_frontend_limit_refusals_total{limit="max_flows_per_source",what="syn"} 7`,
		`qsplice_frontend_limit_refusals_total{limit="max_ports_per_source",what="dispatch"} 2`,
		`qsplice_frontend_limit_closes_total{limit="head_timeout"} 4`,
		`qsplice_frontend_limit_closes_total{limit="flow_lifetime"} 6`,
		`qsplice_frontend_limit_closes_total{limit="half_close_timeout"} 8`,
		`qsplice_frontend_limit_closes_total{limit="max_flows"} 9`,
		`qsplice_frontend_tables_rebuilt_total 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
