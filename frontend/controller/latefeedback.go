package controller

import (
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Feedback after the close. The engine reports a connection closed when
// it has seen both FINs; the back-end's Feedback for the connection's
// last request comes another way (a control datagram, where the server's
// FIN came as the shim's header copy on the flow's own frames). With the
// kernel's echoes (issue 7) the client can have a response whole, and
// close, before the shim has read the response's last reply, so the two
// reports reach the controller in either order. Taken in the order they
// came, a Feedback after the close found no flow: the request stayed
// charged as a typical one, the customer's served count and response
// times missed it, and the connection's timeline had no response.
//
// So a closed flow whose requests reached the back-end and were not
// reported yet waits, closed, for their Feedback, lateFeedbackWait at
// most. Its slots are free at the close as before (the back-end's server
// has closed: it serves nothing more on it); what waits is the
// accounting: the charge's correction, the customer's figures and the
// timeline record, which goes out with the last Feedback or when the
// wait ends.

// lateFeedbackWait bounds how long a closed flow waits for the Feedback
// of a request its back-end has not reported: the shim reports a
// response in the pass that reads its last reply, so the Feedback comes
// within one of the shim's wake-ups and the control path's delay, even
// on a loaded machine far below this.
const lateFeedbackWait = time.Second

// maxLateFlows bounds the closed flows waiting at once; the oldest is
// settled as a typical request to make room.
const maxLateFlows = 4096

// lateFlow is a closed flow waiting for Feedback: its record (serving
// holds the requests that reached the back-end, unreported, oldest
// first) and the engine's close report, for the timeline.
type lateFlow struct {
	rec *flowRec
	ev  splice.Event
}

// lateDue is when a closed flow's wait ends, in the order the flows
// closed (the wait is the same for each).
type lateDue struct {
	flow  splice.FlowID
	until splice.Time
}

// awaitLateFeedback keeps rec, closed with requests in rec.serving that
// reached the back-end unreported, for their Feedback.
func (c *Controller) awaitLateFeedback(rec *flowRec, ev splice.Event, now splice.Time, out *Output) {
	for len(c.late) >= maxLateFlows {
		head := c.lateOrder[0]
		c.lateOrder = c.lateOrder[1:]
		c.settleLate(head.flow, out)
	}
	if c.late == nil {
		c.late = make(map[splice.FlowID]lateFlow)
	}
	c.late[rec.id] = lateFlow{rec: rec, ev: ev}
	c.lateOrder = append(c.lateOrder, lateDue{flow: rec.id, until: now.Add(lateFeedbackWait)})
}

// lateFeedback takes a Feedback m for flow, which the controller no
// longer holds open: if the flow waits closed, its oldest unreported
// request is served (the customer charged what it cost, its figures
// counted), and the flow settled when none is left.
func (c *Controller) lateFeedback(flow splice.FlowID, m *proto.Feedback, now splice.Time, out *Output) {
	lf, ok := c.late[flow]
	if !ok {
		return
	}
	rec := lf.rec
	c.lateServed++
	c.chargeServed(popFront(&rec.serving), m.ServiceTime)
	c.tlFeedback(rec, m, now, out)
	if len(rec.serving) == 0 {
		c.settleLate(flow, out)
	}
}

// settleLate ends flow's wait: what is still unreported is charged as a
// typical request (as closed did before), its timeline goes out and its
// record is kept for a later flow.
func (c *Controller) settleLate(flow splice.FlowID, out *Output) {
	lf, ok := c.late[flow]
	if !ok {
		return
	}
	delete(c.late, flow)
	rec := lf.rec
	for _, r := range rec.serving {
		c.lateUnreported++
		if r.credited && c.credit != nil {
			c.credit.Complete(r.customer, c.typicalService())
		}
	}
	c.tlClosed(rec, lf.ev, out)
	c.keepRec(rec)
	if len(c.late) == 0 {
		c.lateOrder = c.lateOrder[:0]
	}
}

// expireLate settles the closed flows whose wait is over at now.
func (c *Controller) expireLate(now splice.Time, out *Output) {
	n := 0
	for n < len(c.lateOrder) && c.lateOrder[n].until <= now {
		c.settleLate(c.lateOrder[n].flow, out)
		if len(c.lateOrder) == 0 {
			return // settleLate emptied it: nothing waits
		}
		n++
	}
	c.lateOrder = c.lateOrder[:copy(c.lateOrder, c.lateOrder[n:])]
}

// nextLate is when expireLate next has work.
func (c *Controller) nextLate() splice.Time {
	if len(c.lateOrder) == 0 {
		return splice.Never
	}
	return c.lateOrder[0].until
}
