// Package loadgen is qsplice's open-loop HTTP load generator: the client
// side of every experiment. It runs in the lab's client namespace and
// offers one request stream per customer (a Host header, a path, a rate)
// to the front-end's VIP; the front-end classifies each request by
// customer, and the answers come back from the back-ends through their
// shims. What the generator reports (served, refused with 429 or 503,
// failed, latency) is what the scheduler's experiments are judged on.
//
// Open loop. A closed-loop generator (wrk, ab) sends a request only when a
// previous one has finished, so a slow server slows the offered load and
// the requests that would have arrived during a stall are never measured:
// coordinated omission. Here every stream has a schedule of intended send
// times computed in advance from the run's start (Poisson or constant
// gaps), a scheduler releases each request at its time whatever became of
// earlier ones, and latency runs from the intended time to the answer's
// last byte. A request that had to wait (for the scheduler, for a pooled
// connection, for a server that stalled) carries that wait in its latency.
//
// Accounting. A request belongs to the warm-up or to the measured window
// by its intended time. Of those in the window: offered = sent + not sent
// (the in-flight bound was reached), and sent = answered (2xx, 429, 503,
// other) + failed (timeout, connect refused, reset, other). Latencies go
// into log-linear histograms (Histogram) of fixed size that merge into the
// total.
//
// Client. Each stream has a minimal HTTP/1.1 client of its own (GET only;
// Content-Length, chunked and close-delimited bodies): a pool of
// Config.ConnsPerStream keep-alive connections, or a new connection per
// request when that is 0. It was measured to use a third to a half of the
// CPU of net/http's Transport per request (see response.go), and the
// generator shares its two cores with the system under test.
//
// Sessions. RunSessions is the LIFO-Pri experiment's client
// (docs/architecture.md §6): sessions arrive as a Poisson process, each
// walks the shop as package tools/session's Markov model says (or
// replays an httperf --wsesslog session), waits for each page at most its patience, closing
// the connection when that runs out, and retries or leaves as the model
// decides; a 503 or an error is a failed page too (or, with
// refused=leave, a 503 ends the session, as the simulator models a drop).
// Results count, per page class, the requests of the sessions that
// arrived after the warm-up, plus the pages that sessions which left
// early would still have asked for (not generated, see session_left.go),
// and per session how it ended. A drain follows the measured sessions
// past the window while arrivals go on, as the simulator does.
package loadgen
