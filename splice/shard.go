package splice

import (
	"fmt"
	"reflect"

	"github.com/qsplice/qsplice/splice/wire"
)

// Sharding the front-end across cores (issue 7). A front-end with n
// workers runs n engines, each owning the flows whose frames the kernel
// hands its AF_PACKET socket: the sockets form a fanout group that picks
// member wire.PortsHash(sport, dport) % n for a TCP segment
// (link.FanoutPorts). A client's segments to the VIP land on the shard
// of (client port, VIP port) on their own. The back-end's replies on C2
// come from its web port to the handoff port the engine chose, so an
// engine picks only handoff ports p with PortsHash(back-end port, p) % n
// equal to its own index: the
// back-end's side of every connection a shard hands off comes back to
// that shard, and no two shards ever pick the same C2 tuple. FlowIDs are
// congruent to the shard's index modulo n, so whoever holds a FlowID
// (the controller, which is global) knows which engine owns it
// (FlowShard) without asking.
//
// Per-engine limits (MaxFlows, MaxFlowsPerSource, MaxPortsPerSource, the
// challenge ACK and RST budgets) are each shard's: the daemon divides the
// configured totals among its shards, which the port hash spreads a
// source's connections over evenly.

// FlowShard is the index of the engine, among n shards, that owns id.
func FlowShard(id FlowID, n int) int {
	if n <= 1 {
		return 0
	}
	return int(uint64(id) % uint64(n))
}

// validateShard checks the sharding fields of a FrontEndConfig.
func (c *FrontEndConfig) validateShard() error {
	if c.Shards < 0 || c.Shard < 0 || (c.Shards > 0 && c.Shard >= c.Shards) || (c.Shards == 0 && c.Shard != 0) {
		return fmt.Errorf("splice: FrontEndConfig: shard %d of %d", c.Shard, c.Shards)
	}
	if span := int(c.HandoffPortLast) - int(c.HandoffPortFirst) + 1; c.Shards > span {
		return fmt.Errorf("splice: FrontEndConfig: %d shards for %d handoff ports", c.Shards, span)
	}
	return nil
}

// shards is the number of shards, at least 1.
func (e *FrontEnd) shards() int { return max(e.cfg.Shards, 1) }

// ownsPort: the back-end's replies from backendPort to handoff port p
// reach this shard.
func (e *FrontEnd) ownsPort(backendPort, p uint16) bool {
	n := e.shards()
	return n == 1 || int(wire.PortsHash(backendPort, p)%uint32(n)) == e.cfg.Shard
}

// Add adds o's counters to s, to total the shards of a front-end.
// Every field is a count (the gauges Flows, HandoffPorts and Sources
// too: a source with flows on two shards counts twice), so a new field
// is summed without anyone remembering to add it here.
func (s *FrontEndStats) Add(o *FrontEndStats) {
	sv, ov := reflect.ValueOf(s).Elem(), reflect.ValueOf(o).Elem()
	for i := range sv.NumField() {
		f, g := sv.Field(i), ov.Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			f.SetUint(f.Uint() + g.Uint())
		case reflect.Array:
			for j := range f.Len() {
				f.Index(j).SetUint(f.Index(j).Uint() + g.Index(j).Uint())
			}
		default:
			panic("splice: FrontEndStats field " + sv.Type().Field(i).Name + " is not a count")
		}
	}
}
