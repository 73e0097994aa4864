// Package sched decides which request the front-end serves next and which
// back-end serves it.
//
// Place in the data flow: once the front-end has parsed a request head
// (package splice/httphead), it turns it into a Request and hands it to a
// Policy. When a back-end has room, the front-end asks the Policy for the
// Next request and the Dispatcher to Pick a back-end for its port, calls
// Start, and splices the connection there. The back-end's Feedback (service
// time, its own count of requests in progress) comes back through Done and
// Report.
//
// This is the minimal seam: a FIFO policy and a least-connections
// dispatcher. The QoS policies (credit reservation, LIFO-Pri, queue-length
// control) implement the same Policy interface.
//
// Credit is the credit-reservation policy: guaranteed request rates per
// customer, spare capacity shared by weight, caps, bounded queues with a
// timeout. Its documentation describes when credit is added, what a
// request costs and the data structures that keep each decision
// logarithmic in the number of busy customers rather than linear in the
// number of customers.
//
// LifoPri is the overload control for e-commerce sites, a policy a
// listener can select instead of Credit. A Classifier maps each request's
// URL path to a Class (DefaultClasses: four browsing and four transaction
// classes, each with a utility and a queue capacity), and the front-end
// passes the class name as the Request's Customer. Transaction queues are
// served before browsing queues, the queue with the largest length x
// utility first within each group, and browsing queues switch to LIFO
// while the utilization that a UtilizationMeter measures (busy slot time
// over slot capacity per interval) stays high, with hysteresis. Its
// ModeEightFIFO and ModeSingleFIFO are the baselines it is compared with.
//
// Feedback is the third published scheduler (issue 10): priority classes
// with weights (a FeedbackClassifier sorts requests by Host, path, client
// subnet or cookie and recognises sessions), a queue-length PI loop per
// class whose actuator passes new-session requests with a probability,
// keeps the others in a reserve queue and refuses them explicitly after
// a few periods, an FPD merge that keeps each class's share of the
// delivered quality at its weight's share, and content adaptation that
// holds the cluster's utilization at 85% by choosing, per client, a
// cheaper content tree (Request.Tree).
//
// Package tools/sim runs the front-end's controller (frontend/controller),
// and so these policies, in a deterministic simulated cluster.
//
// Everything here is pure: no goroutines, no locks, no clock reads. Time is
// passed in as nanoseconds on the caller's clock, and the same calls in the
// same order always give the same answers, so the policies can be tested
// and simulated deterministically. The caller serialises access.
package sched
