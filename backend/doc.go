// Package backend is the back-end shim daemon. It sits between the host
// kernel's IP stack (a TAP device the kernel's address lives on) and the
// wire (an AF_PACKET socket on the NIC) and runs the splice.Shim engine:
// every frame passes unchanged in both directions except replies on
// spliced connections, which it rewrites to come from the VIP and sends
// straight to the client.
//
// The control protocol is the Agent's (agent.go), a pure state machine
// like the engine: it registers with the front-end until acknowledged,
// sends keepalives and registers again when their echoes stop, answers
// probes, has Splice messages installed in the engine before it
// acknowledges them (which is what guarantees no reply escapes
// untranslated), and turns finished responses into Feedback. The daemon
// stamps every input with one monotonic clock (time since its start) and
// sleeps until the engine's or the agent's next deadline or I/O.
//
// Data flow: two reader goroutines (TAP, wire) -> one loop that owns the
// engine -> writes to the other side; a control goroutine feeds decoded
// messages into the same loop.
package backend
