package splice

// A Splice sent with C2's SYN (issue 7, proto.SpliceAtSYN).
//
// The classic handoff sends the Splice after C2's SYN-ACK reached the
// front-end, and the request only after the shim's SpliceAck came back:
// a round trip to the shim and a wake-up of each daemon on the first
// byte's path, about a sixth of its delay over a direct connection
// (docs/results.md). Everything in a Splice but three numbers is known
// when the front-end sends the SYN, and those three come from the
// kernel's SYN-ACK, which crosses the shim on its way: the kernel's ISN
// (seqDelta = ISN_f - ISN_b), its first TSval (tsOffset maps it to the
// client-facing value the front-end chose) and its window shift. So the
// front-end sends the Splice with the SYN, and the shim completes it from
// the SYN-ACK as it passes and installs it before the SYN-ACK leaves:
// by the time the front-end can send the request, replies are translated.
// The SpliceAck goes when the Splice is installed, in the pass that
// forwards the SYN-ACK, so both reach the front-end together.
//
// Either may come first at the shim. The Splice first (the usual order:
// it is sent ahead of the SYN): it waits in a table bounded and aged like
// the handshakes' (tupleTable), and the SYN-ACK completes it. The SYN-ACK
// first (the Splice was delayed, or went through another worker's
// mailbox): it is recorded as always, and the Splice completes from the
// record on arrival. In both cases the completed Splice goes through
// AddSplice's checks unchanged (shim_guard.go): it must agree with the
// handshake (RequestEnd after the ISN the kernel acknowledged, the options
// it answered), consumes it, and is refused like any other when it does
// not. A waiting Splice changes nothing on the data path: frames of its
// tuple pass as for a tuple without an entry until it is installed.

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// ErrSpliceAwaitsSynAck is AddSplice's answer to a Splice sent with the
// SYN whose SYN-ACK has not crossed the shim yet: it waits for it, and
// the daemon acknowledges it on EvSpliceInstalled, not now.
var ErrSpliceAwaitsSynAck = errors.New("splice: Splice sent with the SYN waits for the back-end's SYN-ACK")

// resolveAtSYN is the classic Splice that m, sent with the SYN, stands for
// once the kernel's SYN-ACK hs is known: the numbers the front-end
// computes from the same SYN-ACK (splice/fe_handoff.go c2Established).
func resolveAtSYN(m *proto.Splice, hs *handshake) proto.Splice {
	r := *m
	r.Flags &^= proto.SpliceAtSYN | proto.SpliceRequest
	r.Request, r.RequestWindow, r.RequestTSVal = nil, 0, 0
	r.SeqDelta = m.SeqDelta - uint32(hs.isnB)
	r.TSOffset = 0
	if m.Flags&proto.SpliceTimestamps != 0 && hs.ts {
		r.TSOffset = m.TSOffset - hs.tsVal
	} else {
		r.Flags &^= proto.SpliceTimestamps
	}
	r.WScaleBackend = 0
	if m.Flags&proto.SpliceWindowScale != 0 {
		r.WScaleBackend = uint8(max(hs.wscale, 0))
	}
	return r
}

// handshake is the SYN-ACK ent was installed on.
func (ent *spliceEntry) handshake() handshake {
	return handshake{isnB: ent.isnB, tsVal: ent.synTSval, wscale: ent.synWScale, ts: ent.synTS}
}

// addSpliceAtSYN takes m, a Splice sent with the SYN on C2 tuple key: it
// installs it when the SYN-ACK was seen, or keeps it waiting for it.
func (s *Shim) addSpliceAtSYN(m *proto.Splice, key fourTuple, now Time) error {
	if m.WScaleBackend != 0 {
		s.stats.SplicesRefused++
		s.stats.RefusedInconsistent++
		return fmt.Errorf("%w: a Splice sent with the SYN names the back-end's window scale %d",
			ErrSpliceInconsistent, m.WScaleBackend)
	}
	old := s.entries[key]
	if old != nil {
		hs := old.handshake()
		if r := resolveAtSYN(m, &hs); old.installedBy(&r) {
			return nil // sent again after it was installed
		}
	}
	if hs, err := s.handshakes.find(key, now); err == nil {
		s.requestWasInSYN(key, m, &hs)
		if r := resolveAtSYN(m, &hs); hs.agrees(&r, s.cfg.MaxRequestAhead) == nil {
			err := s.AddSplice(&r, now)
			if err == nil && m.Flags&proto.SpliceRequest != 0 && s.keepCarried(key, m, now) {
				s.sendCarried(key, &hs, &r)
			}
			return err
		}
		// A SYN-ACK of an earlier connection on the tuple: this one's
		// is still to come.
	}
	// Refuse now what the SYN-ACK cannot mend.
	if err := s.checkPortAndID(m, old); err != nil {
		s.stats.SplicesRefused++
		return err
	}
	kept := *m
	kept.Request = nil // the caller's buffer: the bytes wait in a held slot
	if s.atSYN.note(key, kept, now) {
		s.stats.AtSYNEvicted++
	}
	if m.Flags&proto.SpliceRequest != 0 {
		s.keepCarried(key, m, now)
	} else if h := s.carriedSlot(key); h != nil && h.reqID != m.RequestID {
		s.dropHeld(h) // an earlier connection's on the tuple
	}
	s.stats.AtSYNWaited++
	return ErrSpliceAwaitsSynAck
}

// requestWasInSYN corrects hs, the handshake recorded on key, for m, a
// Splice that carries its request and came after the SYN-ACK: when the
// SYN-ACK acknowledged the whole request, the SYN brought it (the
// front-end filled it, shim_fastopen.go) though the shim had seen neither
// that SYN nor the Splice when the SYN-ACK crossed, so it took the ACK
// for the SYN's ISN. The request was in service from the SYN-ACK's time
// at the latest.
func (s *Shim) requestWasInSYN(key fourTuple, m *proto.Splice, hs *handshake) {
	if m.Flags&proto.SpliceRequest == 0 || hs.inSYN || len(m.Request) == 0 || uint32(hs.isnF+1) != m.RequestEnd {
		return
	}
	s.tookRequestInSYN(key, hs, wire.Seq(m.RequestEnd)-1-wire.Seq(len(m.Request)), len(m.Request), bytes.HasPrefix(m.Request, []byte("HEAD ")))
}

// completeAtSYN installs the Splice waiting on key, if any, now that the
// kernel's SYN-ACK hs crossed: before the SYN-ACK is passed on. The event
// tells the daemon to acknowledge it (or that it was refused). A SYN-ACK
// the waiting Splice does not agree with (an earlier connection's, sent
// again) leaves it waiting.
func (s *Shim) completeAtSYN(key fourTuple, hs *handshake, now Time, out *Output) {
	m, err := s.atSYN.find(key, now)
	if err != nil {
		return
	}
	r := resolveAtSYN(&m, hs)
	if hs.agrees(&r, s.cfg.MaxRequestAhead) != nil {
		return
	}
	s.atSYN.consume(key)
	ev := Event{Kind: EvSpliceInstalled, RequestID: r.RequestID}
	if err := s.AddSplice(&r, now); err != nil {
		s.stats.AtSYNRefused++
		ev.Detail = err.Error()
		if h := s.carriedSlot(key); h != nil {
			s.dropHeld(h)
		}
	} else {
		s.stats.AtSYNCompleted++
		// Also when a resend without the request replaced the Splice
		// that brought it: the slot is the same RequestID's.
		s.sendCarried(key, hs, &r)
		if ent := s.entries[key]; ent != nil && hs.inSYN {
			// The SYN-ACK acknowledged the request, and the front-end
			// took it so (fe_handoff.go): it needs no copy of the first
			// reply to learn it, one frame fewer for it per request.
			ent.reqAcked = true
			// Nor a SpliceAck, if it said so: the SYN-ACK is one.
			ev.FastOpen = r.Flags&proto.SpliceImplicitAck != 0
		}
	}
	out.event(ev)
}
