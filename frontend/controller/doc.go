// Package controller is the front-end's scheduling brain, pure like the
// packet engine it steers: everything between splice.FrontEnd and the
// back-ends' shims that is not moving packets.
//
// # Contract
//
// Inputs, each with the current time: the engine's events (Event, or
// HandleEvents for all of them in an Output), the shims' control messages
// (Control), the passing of time (Tick, due at NextDeadline) and a new
// configuration (Reload). Outputs go into a caller-owned Output: the
// engine's frames and events, control datagrams to send, and log records.
// No clock reads, goroutines, sockets or randomness: the same inputs at
// the same times give the same outputs, so the daemon, the simulator
// (tools/sim), replay (tools/replay) and the tests drive the same object.
// Time never goes backwards across calls; an earlier time than one
// already seen counts as that one.
//
// # Why the controller calls the engine
//
// The controller holds the engine (through the Engine interface, which
// *splice.FrontEnd implements) and calls it: Dispatch, Reject, HoldSplice,
// SpliceAcked, Admit, Abort. The alternative, a list of commands the
// daemon applies afterwards, would split every decision from its outcome:
// a Dispatch fails when the client left while its request waited, an
// Admit when the client reset the connection, and the controller must
// know at once (a failed dispatch frees the back-end it picked for the
// next request in the same pass). With commands it would have to act on
// optimistic guesses and be told later, and its state would describe
// commands not yet applied. Since the engine is pure too, calling it keeps
// the pair deterministic; the daemon keeps only I/O. Frames and events the
// calls produce land in Output.Engine like those of the daemon's own
// Input and Tick calls, and every event there is handed back to the
// controller before a call returns.
//
// # State, and who owns it
//
// Each piece of scheduling state has one owner, here:
//
//   - the queues: one sched.Policy per kind of listener policy (credit,
//     fifo, lifo-pri, eight-fifo, single-fifo, feedback), the request each
//     took out with Next that found no back-end yet (queueSet.head), the
//     utilization meter of the class-based policies, and the feedback
//     policy's classifier with its table of sessions (feedback.go: the
//     loop's refusals are answered 503 + Retry-After as "overload-refused",
//     every back-end Feedback feeds its load monitor, and the content tree
//     it chose travels in sched.Request.Tree);
//   - the back-end table: address, capacity, incarnation, liveness and
//     probing, the slots in use (requests sent on C2 and not reported
//     done), the connections handed off ahead and waiting ready for a
//     slot with their deadline, the follow-ups parked for a slot, and the
//     statistics behind /status;
//   - the dispatcher (sched.Dispatcher), whose count per back-end is that
//     of the requests in service there, kept by the same two functions
//     that start and release them;
//   - one record per flow the controller knows: its back-end, its
//     requests in service (oldest first; responses come back in order),
//     whether a request of it waits in a queue or parked, whether a
//     Splice awaits its SpliceAck (with the resend schedule), and whether
//     it waits ready. A close deletes the record and undoes each of those
//     in one place (closed); the requests that reached the back-end
//     unreported wait, closed, for a Feedback that may still come
//     (latefeedback.go).
//
// The engine owns the TCP side of each flow, including the held request
// of a connection waiting ready; how long it may wait (Config.SlotWait) is
// the controller's decision, enforced with Engine.Reject.
//
// # Binding control messages to their back-end
//
// The daemon's proto.Codec has authenticated a message with its
// back-end's key and found it fresh; Control then refuses, counted by
// reason in Status.ControlRefused, what does not fit the back-end it
// comes from: a message from another address than the one its back-end
// registered, a Register of an older incarnation, and a SpliceAck,
// Feedback or Close naming a request of another back-end or of an
// earlier run of the front-end (RequestIDs carry Config.RequestIDPrefix
// in their high 32 bits). See binding.go.
//
// # Scheduling
//
// A request leaves its queue (Next) only when some live back-end has room
// for one of the queue's ports, so the policy decides as late as it can;
// it goes to the back-end the dispatcher picks (fewest requests in
// service, below capacity plus HandoffAhead), or, should its own port
// have no room, waits at the queue's head. A keep-alive follow-up goes to
// its connection's back-end (Engine.Admit) when a slot is free there, and
// is parked for the next one otherwise. Connections handed off ahead and
// confirmed take freed slots first, then parked follow-ups, then new
// dispatches.
//
// # Accounting
//
// A request holds a back-end slot from its sending on C2 (SpliceAcked or
// Admit) until the shim's Feedback; the dispatcher's count also includes
// handoffs under way, up to Config.HandoffAhead per back-end beyond its
// capacity. A credit request is charged by the scheduler at Next;
// Feedback corrects the charge by the measured service time. A charged
// request that never reached a back-end (its client left first, its
// handoff failed or waited too long, its back-end died) is refunded; so
// are the requests in service on a back-end that died or restarted, whose
// connections are reset.
package controller
