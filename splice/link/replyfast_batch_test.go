package link

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// TestFastPathBatchAppliesEveryCommand: a batch's Deletes and Puts reach
// the config map in one call each, in the order that keeps each
// connection's (Deletes first). A Delete of an entry that is not there,
// among the others, neither fails nor stops them; a Put the map has no
// room for fails alone, counted, and the Puts after it are applied; a
// batch allocates nothing; and the one-by-one path (a kernel without the
// batch commands) leaves the same map.
func TestFastPathBatchAppliesEveryCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF to make the maps); run the tests as root")
	}
	key := func(i int) wire.FastPathKey {
		return wire.MakeFastPathKey([4]byte{198, 18, 0, 21}, [4]byte{198, 18, 0, 101}, 80, uint16(40000+i))
	}
	entry := func(i, gen int) wire.FastPathEntry {
		return wire.FastPathEntry{AllowFrom: wire.Seq(1000 * i), Gen: uint32(gen), Echo: true}
	}
	for _, oneByOne := range []bool{false, true} {
		f, err := NewReplyFastPath(1, 4) // room for four connections
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.noBatch.Store(oneByOne)
		var b FastPathBatch
		for i := range 3 {
			b.Put(key(i), entry(i, i))
		}
		if failed, err := f.Apply(&b); failed != 0 {
			t.Fatalf("one by one %v: three Puts into an empty map: %d failed (%v)", oneByOne, failed, err)
		}
		b.Reset()
		b.Delete(key(0))
		b.Delete(key(7)) // not there
		b.Delete(key(1))
		b.Put(key(1), entry(1, 11)) // the next connection on the tuple
		b.Put(key(3), entry(3, 3))
		b.Put(key(5), entry(5, 5))
		b.Put(key(4), entry(4, 4)) // a fifth entry: no room
		b.Put(key(2), entry(2, 22))
		if b.Len() != 8 {
			t.Fatalf("Len %d, want 8", b.Len())
		}
		failed, err := f.Apply(&b)
		if f.noBatch.Load() != oneByOne {
			t.Errorf("one by one %v: the kernel refused the batch commands", oneByOne)
		}
		if failed != 1 || err == nil {
			t.Errorf("one by one %v: %d failed (%v), want the one Put the map had no room for", oneByOne, failed, err)
		}
		// Gen and AllowFrom of each entry the map should hold.
		want := map[wire.FastPathKey][2]uint32{key(1): {11, 1000}, key(2): {22, 2000}, key(3): {3, 3000}, key(5): {5, 5000}}
		got := map[wire.FastPathKey][2]uint32{}
		var k wire.FastPathKey
		var v [cfgSize]byte
		for it := f.config.Iterate(); it.Next(&k, &v); {
			got[k] = [2]uint32{binary.NativeEndian.Uint32(v[cfgGen:]), binary.NativeEndian.Uint32(v[cfgAllowFrom:])}
		}
		if len(got) != len(want) {
			t.Errorf("one by one %v: the map holds %d entries, want %d: %v", oneByOne, len(got), len(want), got)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("one by one %v: entry %x has Gen and AllowFrom %v, want %v", oneByOne, k, got[k], w)
			}
		}
		allocs := testing.AllocsPerRun(20, func() {
			b.Reset()
			b.Delete(key(9))
			b.Put(key(2), entry(2, 22))
			b.Put(key(3), entry(3, 3))
			if failed, err := f.Apply(&b); failed != 0 {
				t.Errorf("one by one %v: updates of entries there: %d failed (%v)", oneByOne, failed, err)
			}
		})
		if allocs != 0 {
			t.Errorf("one by one %v: %v allocations a batch, want 0", oneByOne, allocs)
		}
	}
}
