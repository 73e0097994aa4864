package frontend

import (
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice"
)

// The controller acting on another shard's engine marks that shard for a
// wake-up only when the engine's deadline moved before the one the shard
// sleeps until (shard.sleepUntil). An action that leaves the deadline
// where it was -- here on an engine with no timer at all -- costs a
// sleeping shard nothing, and an awake shard (sleepUntil 0) is never
// woken: it computes its sleep again before it waits. The wake-ups for
// an earlier deadline are exercised end to end by TestShardedFrontEnd
// (tools/e2e), whose handoffs need them.
func TestControllerDoesNotWakeAShardWhoseDeadlineDidNotMove(t *testing.T) {
	cfg := Config{MAC: feMAC, Workers: 2, VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")},
		Handoff: netip.MustParseAddr("198.18.0.101"), Ports: []uint16{80}}
	cfg.setDefaults()
	d := &Daemon{cfg: cfg}
	var shards []*shard
	for i := range 2 {
		eng, err := splice.NewFrontEnd(engineConfig(&cfg, i, 2))
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, &shard{d: d, idx: i, engine: eng})
	}
	if deadline := shards[1].engine.NextDeadline(); deadline != splice.Never {
		t.Fatalf("an idle engine has a deadline %v; the test needs none", deadline)
	}
	e := &shardedEngine{shards: shards, touched: make([]bool, 2)}
	id := splice.FlowID(1) // shard 1's (splice.FlowShard)
	ran := 0
	act := func(*splice.FrontEnd, splice.Time) error { ran++; return nil }

	shards[1].sleepUntil = 5e9 // asleep until 5 s
	e.on(id, 1e9, act)
	if e.touched[1] || e.touched[0] {
		t.Errorf("asleep until 5 s, deadline unchanged: touched %v, want none", e.touched)
	}
	shards[1].sleepUntil = 0 // awake, in a pass
	e.on(id, 1e9, act)
	if e.touched[1] || e.touched[0] {
		t.Errorf("awake: touched %v, want none", e.touched)
	}
	if ran != 2 {
		t.Fatalf("the action ran %d times on shard 1's engine, want 2", ran)
	}
}
