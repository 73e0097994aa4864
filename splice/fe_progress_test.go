package splice

import "testing"

// TestClientAckedAtIsTheLatestAdvance: a spliced flow's ClientAckedAt is
// the time of the client's latest ACK that acknowledged new bytes; a
// duplicate ACK later does not move it (it proves nothing new reached the
// client), and an unknown flow has none.
func TestClientAckedAtIsTheLatestAdvance(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	if at, ok := sc.h.fe.ClientAckedAt(sc.id); ok {
		t.Fatalf("ClientAckedAt before any reply byte was acknowledged: %v", at)
	}
	base := sc.c.rcvNxt
	sc.clientAck(base + 1000)
	advanced := sc.now
	if at, ok := sc.h.fe.ClientAckedAt(sc.id); !ok || at != advanced {
		t.Fatalf("after an advancing ACK at %v: ClientAckedAt = %v, %v", advanced, at, ok)
	}
	sc.clientAck(base + 1000) // a duplicate
	if at, _ := sc.h.fe.ClientAckedAt(sc.id); at != advanced {
		t.Fatalf("a duplicate ACK moved ClientAckedAt to %v, want %v", at, advanced)
	}
	sc.clientAck(base + 3000)
	if at, _ := sc.h.fe.ClientAckedAt(sc.id); at != sc.now {
		t.Fatalf("after a second advance at %v: ClientAckedAt = %v", sc.now, at)
	}
	if _, ok := sc.h.fe.ClientAckedAt(sc.id + 1000); ok {
		t.Fatal("ClientAckedAt of an unknown flow")
	}
	sc.h.checkCounters()
}
