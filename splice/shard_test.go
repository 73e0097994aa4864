package splice

import (
	"reflect"
	"testing"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// TestShardPicksHandoffPortsTheFanoutReturnsToIt: every handoff port a
// shard picks brings the back-end's replies back to that shard by the
// fanout group's own rule (link.FanoutShard, which the kernel's program
// computes), no two shards pick the same C2 tuple, and FlowIDs name
// their shard.
func TestShardPicksHandoffPortsTheFanoutReturnsToIt(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		used := map[uint16]int{}
		for s := range n {
			h := newFE(t, func(c *FrontEndConfig) { c.Shard, c.Shards = s, n })
			for i := range 40 {
				c := newClient(uint16(41000+i), wire.Seq(0x1000*(i+1)), fullOffer(5))
				id := queuedRequest(t, h, c, shortRequest)
				if FlowShard(id, n) != s {
					t.Fatalf("shard %d of %d: flow %d names shard %d", s, n, id, FlowShard(id, n))
				}
				syn := dispatch(t, h, id, t0+2*ms)
				p := uint16(syn.tcp.SrcPort)
				if other, ok := used[p]; ok {
					t.Fatalf("shard %d of %d picked port %d, which shard %d holds", s, n, p, other)
				}
				used[p] = s
				// The back-end's SYN-ACK, as the fanout group sees it.
				reply := frame(wire.TCPFrame{SrcMAC: backendMAC, DstMAC: feMAC,
					Src: backendIP, Dst: handoffIP, SrcPort: webPort, DstPort: p,
					Seq: 1, Ack: c.isn + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 100})
				if got := link.FanoutShard(reply, n); got != s {
					t.Fatalf("shard %d of %d picked port %d; its replies go to shard %d", s, n, p, got)
				}
			}
		}
	}
}

func TestShardConfigRefused(t *testing.T) {
	for _, tc := range []struct{ shard, shards int }{{2, 2}, {-1, 2}, {1, 0}, {0, -1}} {
		cfg := testFrontEndConfig(func(c *FrontEndConfig) { c.Shard, c.Shards = tc.shard, tc.shards })
		if _, err := NewFrontEnd(cfg); err == nil {
			t.Errorf("shard %d of %d accepted", tc.shard, tc.shards)
		}
	}
	cfg := testFrontEndConfig(func(c *FrontEndConfig) {
		c.HandoffPortFirst, c.HandoffPortLast, c.Shards = 30000, 30002, 4
	})
	if _, err := NewFrontEnd(cfg); err == nil {
		t.Error("4 shards over 3 handoff ports accepted")
	}
}

// TestFrontEndStatsAddSumsEveryField fills every counter with distinct
// values and checks that Add sums each one, arrays included.
func TestFrontEndStatsAddSumsEveryField(t *testing.T) {
	var a, b FrontEndStats
	av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	k := uint64(1)
	set := func(v reflect.Value, mul uint64) {
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() == reflect.Array {
				for j := range f.Len() {
					f.Index(j).SetUint(k * mul)
					k++
				}
				continue
			}
			f.SetUint(k * mul)
			k++
		}
	}
	set(av, 1)
	k = 1
	set(bv, 1000)
	a.Add(&b)
	k = 1
	var want FrontEndStats
	set(reflect.ValueOf(&want).Elem(), 1001)
	if a != want {
		t.Errorf("sum\n%+v\nwant\n%+v", a, want)
	}
}
