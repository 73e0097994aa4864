package link

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
)

// TestFastPathsAttachAsClsactFilters attaches both fast paths' programs
// the way a kernel without TCX (before 6.6) gets them: as direct-action
// filters of a veth's clsact qdisc, the SYN fast path's on its ingress,
// the reply fast path's on its egress. A filter left by a run that ended
// without Close (a clsact filter outlives its process) is replaced, not
// doubled; someone else's filter in our place is refused, not replaced;
// Close removes ours. The lab's VM guests (Debian's 6.1) run the paths
// this way.
func TestFastPathsAttachAsClsactFilters(t *testing.T) {
	onVeth(t, "qs-clsact", func(ifi *net.Interface) error {
		syn, err := NewSYNFastPath(synHost, 1)
		if err != nil {
			return err
		}
		defer syn.Close()
		reply, err := NewReplyFastPath(ifi.Index, 16)
		if err != nil {
			return err
		}
		defer reply.Close()
		for _, c := range []struct {
			name    string
			prog    *ebpf.Program
			ingress bool
		}{{"qsplice_syn", syn.Program(), true}, {"qsplice_reply", reply.prog, false}} {
			if err := clsactRound(ifi.Index, c.name, c.prog, c.ingress); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
		return nil
	})
}

// clsactRound attaches prog as name at one hook of device ifindex twice
// (the second as after a crash), then over a foreign filter, checking
// the hook's filters each time. It reports rather than fails: it runs on
// nstest.Do's goroutine.
func clsactRound(ifindex int, name string, prog *ebpf.Program, ingress bool) error {
	info, err := prog.Info()
	if err != nil {
		return err
	}
	id, _ := info.ID()
	first, err := attachClsact(name, ifindex, prog, ingress)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	// A second run that found the first's filter, which it never closed.
	second, err := attachClsact(name, ifindex, prog, ingress)
	if err != nil {
		return fmt.Errorf("attach over a filter of ours left behind: %w", err)
	}
	fs, err := hookFilters(ifindex, ingress)
	if err != nil {
		return err
	}
	if len(fs) != 1 || fs[0].Name != name || !fs[0].DirectAction || fs[0].Id != int(id) {
		return fmt.Errorf("after two attaches the hook holds %s; want one direct-action filter %s of program %d", describe(fs), name, id)
	}
	_ = first // replaced by second: closing either removes the one filter
	if err := second.Close(); err != nil {
		return err
	}
	if fs, err = hookFilters(ifindex, ingress); err != nil || len(fs) != 0 {
		return fmt.Errorf("after Close the hook holds %s (%v)", describe(fs), err)
	}
	// Someone else's filter in our place stays.
	if _, err := attachClsact("someone_else", ifindex, prog, ingress); err != nil {
		return err
	}
	if _, err := attachClsact(name, ifindex, prog, ingress); err == nil || !strings.Contains(err.Error(), "another filter") {
		return fmt.Errorf("attach over someone else's filter: %v, want a refusal", err)
	}
	if fs, err = hookFilters(ifindex, ingress); err != nil || len(fs) != 1 || fs[0].Name != "someone_else" {
		return fmt.Errorf("someone else's filter was touched: the hook holds %s (%v)", describe(fs), err)
	}
	return (&clsactFilter{filter: &netlink.BpfFilter{FilterAttrs: fs[0].FilterAttrs, Name: fs[0].Name}}).Close()
}

// hookFilters lists the BPF filters on device ifindex's ingress or egress.
func hookFilters(ifindex int, ingress bool) ([]*netlink.BpfFilter, error) {
	dev, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if ingress {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	all, err := netlink.FilterList(dev, parent)
	if err != nil {
		return nil, fmt.Errorf("list filters: %w", err)
	}
	var bpf []*netlink.BpfFilter
	for _, f := range all {
		b, ok := f.(*netlink.BpfFilter)
		if !ok {
			return nil, fmt.Errorf("a filter of type %s on the hook", f.Type())
		}
		bpf = append(bpf, b)
	}
	return bpf, nil
}

func describe(fs []*netlink.BpfFilter) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d filters", len(fs))
	for _, f := range fs {
		fmt.Fprintf(&b, " [%s prog %d da %v prio %d handle %#x proto %#x]", f.Name, f.Id, f.DirectAction, f.Priority, f.Handle, f.Protocol)
	}
	return b.String()
}
