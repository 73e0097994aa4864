// Package frontend is the front-end daemon: a thin loop around two pure
// state machines, the packet engine (splice.FrontEnd) and the scheduling
// controller (frontend/controller). It owns the I/O: the link to the VIPs
// (AF_PACKET on a wire, or a TAP on a bridge), the UDP control socket the
// back-end shims speak to (package proto), the clock, SIGHUP reloads of
// the configuration file, and an admin HTTP server for /status (JSON) and
// /metrics (Prometheus text), both rendered from the controller's and the
// engine's snapshots.
//
// Data flow (loop.go): the loop sleeps in a link.Poller on the link's and
// the control socket's descriptors; each pass reads the frames and the
// control datagrams waiting (one recvmmsg each, or nothing when it woke
// for a deadline), stamps them with one time, lets the engine and then
// the controller handle them, runs the timers due, and writes what came
// out: frames in one batch, control datagrams in another, log records.
// Between passes the loop sleeps until input arrives or the earlier of
// the engine's and the controller's deadlines, never on a fixed ticker.
//
// Time is monotonic time since the daemon started (splice.Time), taken
// once per pass and never going backwards, so a step of the wall clock
// moves no timer, cookie slot or timestamp clock.
//
// The loop is the only goroutine that touches the engine and the
// controller; the admin server asks it for snapshots.
package frontend
