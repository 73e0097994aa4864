package controller

import (
	"log/slog"
	"net/netip"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Binding: which back-end may say what (issue 9).
//
// The daemon's proto.Codec has made sure a message is genuine (sealed
// with the key of the back-end its header names), fresh, and not a
// reflection of the front-end's own. What needs the controller's state
// is checked here, before a message changes anything:
//
//   - a Register must come from the control address it registers;
//   - every other message must come from the control address its
//     back-end registered, and name a back-end the controller knows;
//   - a SpliceAck, Feedback or Close must name a request of this
//     front-end's run (its RequestID prefix) that, if still known,
//     belongs to the back-end that sends it: one back-end cannot end,
//     confirm or account another's request.
//
// A refused message is counted by reason (Status.ControlRefused) and
// logged at debug level; nothing else happens.
//
// RequestIDs. The engine numbers flows from 1 on every start, so the
// RequestID of a Splice is the flow id's low 32 bits under a prefix
// drawn at random per start of the front-end (Config.RequestIDPrefix):
// a shim that still holds a splice of an earlier run of the front-end,
// or a message of that run, can never name a request of this one. The
// flow id is found again from the low 32 bits and the newest flow id
// seen, since live flows are far fewer than 2^32 apart.

// Refusal reasons of Status.ControlRefused.
const (
	refusedRegisterAddress = "register-address"  // a Register from another address than the one it registers
	refusedOlderRegister   = "older-incarnation" // a Register of an incarnation older than the one known
	refusedUnknownBackend  = "unknown-backend"   // a message of a back-end not registered
	refusedSourceAddress   = "source-address"    // a message from another address than its back-end's
	refusedForeignRequest  = "foreign-request"   // a request of another back-end, or of another run of the front-end
	refusedUnexpected      = "unexpected-type"   // a message a back-end does not send
)

// requestID is the RequestID of flow's Splice.
func (c *Controller) requestID(flow splice.FlowID) uint64 {
	return uint64(c.cfg.RequestIDPrefix)<<32 | uint64(uint32(flow))
}

// flowOf is the flow a RequestID of this run names; false if the prefix
// is not this run's.
func (c *Controller) flowOf(id uint64) (splice.FlowID, bool) {
	if uint32(id>>32) != c.cfg.RequestIDPrefix {
		return 0, false
	}
	flow := c.lastFlow&^0xffffffff | splice.FlowID(uint32(id))
	if flow > c.lastFlow && flow >= 1<<32 {
		flow -= 1 << 32 // from before the low bits last wrapped
	}
	return flow, true
}

// noteFlow remembers the newest flow id the engine reported.
func (c *Controller) noteFlow(flow splice.FlowID) {
	c.lastFlow = max(c.lastFlow, flow)
}

// bound checks a control message from `from` against what the
// controller knows; it returns the refusal reason, or "" if the message
// may be handled.
func (c *Controller) bound(from netip.AddrPort, msg proto.Message) string {
	if r, ok := msg.(*proto.Register); ok {
		if from != netip.AddrPortFrom(r.IP, r.ControlPort) {
			return refusedRegisterAddress
		}
		if be := c.backends[r.BackendID]; be != nil && r.Incarnation < be.incarnation {
			return refusedOlderRegister
		}
		return ""
	}
	be := c.backends[proto.BackendOf(msg)]
	switch {
	case be == nil:
		return refusedUnknownBackend
	case from != be.ctl:
		return refusedSourceAddress
	}
	var id uint64
	switch m := msg.(type) {
	case *proto.Keepalive:
		return ""
	case *proto.SpliceAck:
		id = m.RequestID
	case *proto.Feedback:
		id = m.RequestID
	case *proto.Close:
		id = m.RequestID
	default:
		return refusedUnexpected
	}
	flow, ok := c.flowOf(id)
	if !ok {
		return refusedForeignRequest
	}
	if rec := c.flows[flow]; rec != nil && rec.be != be {
		return refusedForeignRequest
	}
	return ""
}

func (c *Controller) refuse(reason string, from netip.AddrPort, msg proto.Message, out *Output) {
	if c.refused == nil {
		c.refused = make(map[string]uint64)
	}
	c.refused[reason]++
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "control message refused", "reason", reason, "type", msg.Type().String(),
			"backend", proto.BackendOf(msg), "from", from)
	}
}
