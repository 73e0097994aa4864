// Package frontend is the front-end daemon: it owns the VIPs through a
// link (AF_PACKET on a wire, or a TAP on a bridge), runs the splice.FrontEnd
// engine in one event loop, queues parsed requests (package sched), picks a
// back-end, and speaks the control protocol (package proto) with the
// back-end shims over UDP: Register/Keepalive in, Splice out, SpliceAck and
// Feedback in. An admin HTTP server exposes /status (JSON) and /metrics
// (Prometheus text).
//
// Data flow: link reader goroutine -> loop (engine.Input, events, control)
// -> link writes. The loop is the only goroutine that touches the engine,
// the queue and the dispatcher; the admin server asks it for snapshots.
package frontend
