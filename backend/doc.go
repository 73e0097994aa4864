// Package backend is the back-end shim daemon. It sits between the host
// kernel's IP stack (a TAP device the kernel's address lives on) and the
// wire (an AF_PACKET socket on the NIC) and runs the splice.Shim engine:
// every frame passes unchanged in both directions except replies on
// spliced connections, which it rewrites to come from the VIP and sends
// straight to the client.
//
// It registers with the front-end over the control protocol, sends
// keepalives, installs Splice messages in the engine before acknowledging
// them (which is what guarantees no reply escapes untranslated), and
// reports each request's service time in a Feedback message.
//
// Data flow: two reader goroutines (TAP, wire) -> one loop that owns the
// engine -> writes to the other side; a control goroutine feeds decoded
// messages into the same loop.
package backend
