package splice

import "github.com/qsplice/qsplice/splice/wire"

// A reuse the shim refused. The front-end's view of a pooled C2 and the
// shim's may differ for a moment: the server closed the C2 and its FIN
// is on its way, or the shim restarted and the front-end has not yet
// heard its new Register (which empties the pool for it: DropPool). The
// shim then refuses the Splice that reuses the C2 (ErrSpliceNotIdle).
// The request has not been served there: a request on a reused C2 goes
// after its SpliceAck, or, early, marked for the shim to hold until its
// Splice moves the C2, which it never does. (A shim that lost the entry
// has nothing to hold it on, and it may reach the server's old
// connection; only safe requests go early, which HTTP lets a client
// send again.) So rather than reset the client's connection, the
// front-end resets the refused C2 and dispatches the flow again, on a
// new C2: once; a flow whose new C2 is refused too is aborted.

// RedispatchRefused dispatches flow id again on a new C2 to the same
// back-end after the shim refused the Splice that gave it a pooled one,
// carrying its request as DispatchCarrying does when carry is set: the
// controller gets a new EvSplice. It fails (ErrFlowState) for a flow
// not on a reused C2, or whose server has shown it had the request.
func (e *FrontEnd) RedispatchRefused(id FlowID, carry bool, now Time, out *Output) error {
	f := e.byID[id]
	if f == nil {
		return ErrNoFlow
	}
	// Early, the flow is spliced already (its request went with the
	// Splice), but nothing came back: no ACK of the request, no
	// response, nothing more asked.
	early := f.state == stSpliced && f.respPending == 1 && !f.respEndKnown && f.reqUna == f.c2First && !f.cliFin
	if !f.reused || f.reuseTaken || f.state != stSpliceWait && !early {
		return ErrFlowState
	}
	e.toBackend(f, f.c2First, 0, wire.TCPFlagRST, nil, nil, out) // the refused C2, at the server's rcv_nxt
	e.releasePort(f, now)
	if early {
		e.stats.HandoffsDone-- // it was not
	}
	// What the reuse set (reuseC2, SpliceAcked) that a new C2's SYN-ACK
	// does not set again.
	f.reused, f.reuseTaken, f.c2AckOwed, f.c2Up = false, false, false, false
	f.cliTSOff, f.c2PeerWin = 0, 0
	f.rw = rewriteRec{}
	f.respPending = 0
	f.spliceHeld = false
	f.tl.Reused = false
	f.state = stQueued
	e.stats.C2ReusesRefused++
	return e.dispatchNew(f, f.backend, carry, now, out)
}
