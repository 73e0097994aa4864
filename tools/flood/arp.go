package flood

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// ResolveMAC asks target's MAC with ARP (from srcMAC/srcIP) on lk,
// repeating the request every 200 ms until an answer comes or ctx ends.
// Frames read meanwhile are discarded, so call it before Run.
func ResolveMAC(ctx context.Context, lk link.BatchLink, srcMAC wire.MAC, srcIP, target netip.Addr) (wire.MAC, error) {
	req := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(req, wire.ARPRequest, srcMAC, wire.IP4From(srcIP), wire.MAC{}, wire.IP4From(target), wire.BroadcastMAC)
	b := link.NewBatch(batchLen, 2048)
	want := wire.IP4From(target)
	var p wire.Packet
	for {
		if err := lk.WriteFrame(req); err != nil {
			return wire.MAC{}, err
		}
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			n, err := lk.ReadBatch(b)
			if err != nil {
				return wire.MAC{}, err
			}
			for i := range n {
				if wire.Parse(b.Frame(i), &p) == nil && p.Kind == wire.KindARP &&
					p.ARP.Op() == wire.ARPReply && p.ARP.SenderIP() == want {
					return p.ARP.SenderMAC(), nil
				}
			}
			if n == 0 {
				select {
				case <-ctx.Done():
					return wire.MAC{}, fmt.Errorf("flood: no ARP reply for %v: %w", target, ctx.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
}
