// Package replay drives the front-end packet engine (splice.FrontEnd)
// offline from a pcap of client traffic, with simulated back-ends, and
// records everything the engine sends into another pcap.
//
// Where it sits: outside the live data path, in place of the front-end
// daemon's I/O. The daemon feeds the engine frames from a link and its
// clock; replay feeds it the capture's client frames at the capture's own
// timestamps. The engine's events go to the front-end's own controller
// (frontend/controller), configured by Config.Scheduler (qsplice-replay
// -config FILE takes it from a front-end configuration file), which
// schedules every request as the daemon would: first requests are queued
// by their listener's policy and dispatched to the least-loaded back-end,
// keep-alive follow-ups are queued and admitted (or refused in their
// stream). Each back-end host is played by a small scripted TCP responder
// and its shim: the shim confirms each Splice after Config.ControlDelay
// and reports each request handed over served (Feedback) after
// Config.ServiceDelay and the trip back. Same input and Config, same
// output, byte for byte: there are no goroutines, no clock reads and no
// randomness except what Config.Seed derives. That is what makes the
// engine usable as a research instrument: a change to the engine or the
// scheduling shows up as a diff of two replays of the same capture.
//
// # Event loop
//
// A discrete-event loop merges four sources in time order: the capture's
// frames, the engine's own deadlines (FrontEnd.NextDeadline and Tick), the
// controller's (while it holds a connection), and the replay's scheduled
// actions (frames the simulated back-ends send, the shims' control
// messages). At equal times scheduled actions run first, then engine
// deadlines, then the controller's, then capture frames; ties within the
// actions go in the order they were scheduled. The simulated back-ends
// register with the controller at the first capture frame. Engine time never runs backwards: a capture
// frame stamped earlier than the current engine time is fed at the current
// time. After the last capture frame the loop keeps running timers for
// Config.Drain of engine time, so answers such as 408 and the
// retransmissions and lingering that follow still happen.
//
// # Which capture frames are fed
//
// The capture may be pcap or pcapng, with Ethernet frames; a Linux
// cooked capture (tcpdump -i any) is refused with ErrCookedCapture, as it
// lacks the Ethernet headers. A capture of which no IPv4 frame is for the
// VIP gives ErrNothingFed.
//
// ARP frames and IPv4 frames whose destination is the VIP go to the
// engine. The VIP is Config.VIP or, when that is zero, the destination of
// the capture's first SYN to a listening port (ErrNoVIP if there is none;
// frames before it are fed too). Frames from the VIP (the old
// front-end's output) and to or from back-ends are not fed: they are what
// the captured system did, and replaying is about what this engine does.
// They are still read, because the old front-end's SYN-ACKs say which ISN
// the client was talking to.
//
// # Rewriting the client's frames
//
// The capture was made against some other front-end, which answered each
// SYN with its own ISN (a SYN cookie of another secret, or a kernel ISN)
// and its own timestamp clock. Our engine issues a different cookie, so the
// client's later ACK numbers would not match it and every final handshake
// ACK would be dropped as a bad cookie. Replay therefore rewrites every
// client frame after the SYN, per connection (client address and port, VIP
// and port):
//
//	shift   = ourISN - origISN   (ourISN from our engine's SYN-ACK;
//	                              origISN from the captured SYN-ACK if the
//	                              capture holds it, else the client's first
//	                              ACK number minus one)
//	tsShift = ourTS - origTS     (TSvals of the same two SYN-ACKs; or the
//	                              first TSecr the client sent)
//
//	ack  += shift, each SACK edge += shift, TSecr += tsShift (when non-zero)
//
// with the TCP checksum updated incrementally (RFC 1624), so a frame whose
// checksum was wrong in the capture stays wrong, as it would through a
// router. Sequence numbers, payloads and everything else are left alone:
// they are the client's own. A new SYN with another ISN on the same tuple
// starts the learning again (port reuse). A client frame of a connection
// whose SYN-ACK from our engine was never seen is fed unchanged and
// counted as unmapped.
//
// The shift is constant per connection, which is exact for sequence
// numbers and a good approximation for timestamps (both front-ends tick in
// milliseconds). The client's ACKs after the splice acknowledge the
// response bytes the captured back-end sent; the simulated back-ends send
// no response body, so the engine forwards ACKs for bytes the simulated
// back-end never sent, which it ignores. (Once spliced the engine checks
// only that an ACK lies within the client's windows; before the splice it
// knows such an ACK is impossible and drops it, so the simulated handoff
// must finish before the captured client acknowledges its response: keep
// the delays short when replaying a capture of a fast server.)
//
// # Simulated back-ends
//
// Back-end k (1..Config.Backends) is 198.18.0.(20+k) with MAC
// 02:00:c6:12:00:(20+k), as in the lab, and serves Config.Capacity
// requests at once on every port (a request goes to the port the client
// connected to, as live). Each answers the C2 SYN after Config.LinkDelay with a SYN-ACK whose ISN is a
// seeded hash of the 4-tuple, offering MSS 1460, window scale 7, SACK and
// timestamps only when the SYN offered them; acknowledges request bytes
// with a header-only ACK (what the shim's copy of the first response
// segment looks like to the front-end) after Config.ServiceDelay; and
// answers the client's FIN with its own FIN after Config.LinkDelay. Its
// frames are written to the output capture and fed to the engine at their
// simulated send time.
//
// # Golden output
//
// testdata/three-clients.pcap is a small capture made by the test helper
// (three clients: a spliced GET in two segments, a malformed request
// answered 400, an unfinished head answered 408); three-clients.golden is
// the hex SHA-256 of its replay with the default Config. After an
// intentional change of the engine's output, regenerate both with
//
//	go test ./tools/replay -run TestGolden -update
//
// and review the difference with tshark before committing them.
package replay
