// Package frontend is the front-end daemon: a thin loop around two pure
// state machines, the packet engine (splice.FrontEnd) and the scheduling
// controller (frontend/controller). It owns the I/O: the link to the VIPs
// (AF_PACKET on a wire, or a TAP on a bridge), the UDP control socket the
// back-end shims speak to (package proto), the clock, SIGHUP reloads of
// the configuration file, and an admin HTTP server for /status (JSON) and
// /metrics (Prometheus text), both rendered from the controller's and the
// engine's snapshots.
//
// Data flow (loop.go, shard.go): with -workers N the front-end runs N
// shards, each an engine on an AF_PACKET socket of one fanout group with
// a loop of its own. A shard's loop sleeps in a link.Poller on its link's
// descriptor (shard 0 also on the control socket's); each pass reads the
// frames waiting (one recvmmsg, or none when it woke for a deadline),
// lets its engine handle them and run its timers due, then, if that
// produced events, control datagrams wait or the controller's timers are
// due, runs the global controller under its lock, and writes what came
// out: control datagrams first, then frames in one batch, then log
// records. Between passes a loop sleeps until input arrives or its
// engine's deadline (shard 0: or the controller's), never on a fixed
// ticker. While the loops together are busy for less than half a core,
// shard 0's loop serves every shard and the others park (gather.go,
// -gather): one wake-up per frame burst instead of one per shard.
//
// Clients' SYNs are answered in the kernel where it can (synanswer.go,
// -syn-answer): a TC program on the link's ingress sends the engine's
// SYN-ACK before any loop wakes; the engines still read the SYN and send
// nothing for it, and shard 0's loop keeps the program's cookie keys.
//
// Time is monotonic time since the daemon started (splice.Time); each
// engine and the controller take the later of the clock and the last
// time they were given when they are entered, so none ever sees time go
// backwards, and a step of the wall clock moves no timer, cookie slot or
// timestamp clock.
//
// Locks (shard.go): a shard's pass holds its engine's lock while it feeds
// frames in; the controller, under its own lock, reaches a flow's engine
// under that engine's lock, per request, never per frame. The admin
// server asks shard 0's loop for snapshots.
package frontend
