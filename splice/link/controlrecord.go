package link

import "net/netip"

// ControlRecorder is told of every datagram a ControlSocket receives
// (inbound, from the peer to the socket's address) and sends (outbound,
// once the kernel took it), for captures (PcapngWriter.ControlRecorder).
// b is valid only during the call. It is called from the socket's
// owner's loop: it must not block for long, and it is off the
// allocation-free path only when one is set.
type ControlRecorder interface {
	RecordDatagram(b []byte, from, to netip.AddrPort, inbound bool)
}

// Record makes s report every datagram it sends and receives to r from
// now on; nil stops it. Call it before the loop runs.
func (s *ControlSocket) Record(r ControlRecorder) {
	s.rec = r
	s.tx.rec, s.tx.local, s.tx.max = r, s.local, s.max
}

// recordReceived reports the datagrams of the last Recv; one cut at the
// limit is reported cut.
func (s *ControlSocket) recordReceived() {
	for i := range s.rx.count {
		b, from, _ := s.Datagram(i)
		if n := int(s.rx.hdrs[i].n); n < len(b) {
			b = b[:n]
		}
		s.rec.RecordDatagram(b, from, s.local, Inbound)
	}
}

// recordSent reports queued datagrams [first, first+n) the kernel took.
func (t *controlTx) recordSent(first, n int) {
	for m := first; m < first+n; m++ {
		b := t.slots[m*t.max : m*t.max+int(t.iov[m].Len)]
		to := netip.AddrPortFrom(netip.AddrFrom4(t.names[m].Addr), portOf(&t.names[m]))
		t.rec.RecordDatagram(b, t.local, to, Outbound)
	}
}
