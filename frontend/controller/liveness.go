package controller

import "github.com/qsplice/qsplice/splice"

// ClientProgress is the engine call that says when a spliced
// connection's client last acknowledged new bytes:
// splice.FrontEnd.ClientAckedAt. An Engine without it (the simulator's)
// leaves liveness to the control messages alone.
type ClientProgress interface {
	ClientAckedAt(id splice.FlowID) (splice.Time, bool)
}

var _ ClientProgress = (*splice.FrontEnd)(nil)

// progressSeen counts the latest client progress on be's connections as a
// sign of life, before checkBackends probes be or declares it dead. Once
// spliced, the bytes a client acknowledges are be's, sent by its shim, so
// be is serving even if its keepalives are late: a back-end starved of
// CPU (a TCG guest on a loaded host was seen silent on the control
// channel for 1.9 s in the middle of a 64 MB download) sends its control
// datagrams through the same busy shim and queues as its responses.
// Declaring it dead would reset transfers that are moving. Only called
// for a back-end already silent for 1.25 keepalive intervals.
//
// A client's ACK is the client's word, not the back-end's: the front-end
// never sees the response, so it cannot check that the bytes acknowledged
// were sent. Client progress therefore counts only up to
// progressGrace keepalive intervals after the back-end was last heard on
// the authenticated control channel; otherwise one client that keeps
// acknowledging would keep a dead back-end in the dispatcher's rotation
// for ever. A back-end is thus dead at most progressGrace + 1.75
// intervals after its last control message.
func (c *Controller) progressSeen(be *backend) {
	cp, ok := c.eng.(ClientProgress)
	if !ok {
		return
	}
	latest := be.lastSeen
	for id, rec := range c.flows {
		if rec.be != be {
			continue
		}
		if t, ok := cp.ClientAckedAt(id); ok && t > latest {
			latest = t
		}
	}
	latest = min(latest, be.lastHeard.Add(progressGrace*c.cfg.KeepaliveInterval))
	if latest > be.lastSeen {
		be.lastSeen, be.probing = latest, false
	}
}

// progressGrace bounds, in keepalive intervals after the back-end's last
// control message, how long its clients' progress keeps it alive: the
// longest silence seen from a working back-end was 2.5 intervals (a TCG
// guest on a loaded host, in the middle of a 64 MB download).
const progressGrace = 3
