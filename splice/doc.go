// Package splice is qsplice's packet engine: two sans-I/O engines that
// together hand a client's TCP connection over to a back-end's unmodified
// kernel web server, so that the response goes straight from the back-end
// to the client and never through the front-end.
//
// This comment is the theory of operation: what each engine keeps, who
// owns which numbers, who retransmits what, and which test pins each of
// the traps. It summarises docs/architecture.md; the code is the
// truth, and the file named with each part says where to read it.
//
// # The picture
//
// The front-end owns the virtual IP (VIP). Its engine, FrontEnd, accepts
// the client's connection, reads the request head, and, once the daemon
// picked a back-end, opens a second connection to it, C2, from a handoff
// address and port of its own. The back-end's engine, Shim, is a bump in
// the wire between the back-end's kernel (PortHost, a TAP) and the network
// (PortWire): it passes everything unchanged except the replies on C2,
// which it rewrites to come from the VIP and sends to the client.
//
//	               request direction: always through the front-end
//	client ──────> FrontEnd ───────────────────────> Shim ───────> back-end kernel
//	(to VIP:port)  translates ACK, SACK,                watches        │
//	   ^           TS echo onto C2                      requests       │ replies
//	   │               ^                              │                │ on C2
//	   │               └─ header-only copies ─────────┤ <──────────────┘
//	   │                  (request not acked yet;     │
//	   │                   every FIN and RST)         │
//	   └── replies: from VIP:port, seq + delta, ──────┘
//	       TSval + offset, window rescaled
//
// Everything else sits around the engines: header views and checksums in
// package wire, the request-head parser in httphead, devices in link, the
// control messages between the hosts in package proto, the scheduling in
// frontend/controller, and the daemons in frontend and backend.
//
// # The contract: frames and time in, frames and events out
//
// Neither engine reads a clock, sleeps, starts a goroutine or touches a
// socket. Every call takes the current Time (nanoseconds on the caller's
// clock: the daemons pass monotonic time since they started, stamped once
// per pass of their loop so it never goes back; replay passes capture
// timestamps; tests pass what they like) and writes what it produced into
// a caller-owned Output:
//
//   - FrontEnd.Input(frame, now, out) and FrontEnd.InputVNet(frame, vh,
//     now, out): one Ethernet frame from the wire, with the virtio-net
//     header it came with (its daemon cuts GRO'd super-frames into
//     MTU-sized segments first, frontend/loop.go; a partial checksum is
//     completed by the engine). The header's DATA_VALID spares the engine
//     verifying a TCP checksum the kernel already verified (Ingress
//     checks below).
//   - Shim.Input(port, frame, now, out) and Shim.InputVNet(port, frame,
//     vh, now, out): a frame from either side, with the virtio-net header
//     it came with (see Super-frames below).
//   - Tick(now, out) runs the timers due; NextDeadline says when Tick next
//     has work. The caller sleeps until then or until a frame arrives.
//
// Output.Frames are the frames to send, each with its Port and the
// virtio-net header to send it with (OutFrame.VNet; the zero header for
// frames the engine built). A frame the engine rewrote in place aliases
// the input frame; a frame it built lives in the Output's arena. Both stay
// valid until Output.Reset, so the caller sends everything before it
// reuses the input buffer or feeds the engine again. An Output is reused
// call after call, which is why the forwarding and translating paths
// allocate nothing (alloc_test.go). A frame with no Data was taken back
// by a later call on the same Output (the front-end's takeBackAck): the
// caller skips it.
//
// Output.Events are what the daemon must act on. On the front-end, the
// controller answers them by calling the engine back; every call names a
// flow that may have moved on since the event, and then changes nothing
// and says so (ErrNoFlow, ErrFlowState, ErrNotWaiting):
//
//   - EvRequest: a request head is complete. Dispatch(id, backend) opens
//     C2 to the chosen back-end; Reject(id, status, ...) answers 503 or
//     429 instead and closes. Rewrite(id, path) before Dispatch or
//     Admit sends the request with another path in its request-target (a
//     content tree; see Request rewriting). With FollowUp set the request came on a
//     connection already spliced: Admit(id) lets it through to the same
//     back-end, RejectFollowUp(id, ...) answers it inside the stream.
//   - EvSplice: C2 is up; Event.Splice is the proto.Splice the daemon sends
//     to the back-end's shim. When the shim's SpliceAck comes,
//     SpliceAcked(id) sends the request; or, if the back-end has no free
//     slot yet, HoldSplice(id) keeps the ready connection waiting until
//     SpliceAcked or Reject.
//   - EvAnswered: the front-end answered the client itself (Status,
//     Detail).
//   - EvClosed: a flow ended (Reason; Bytes forwarded; Backend if it was
//     dispatched). CloseHandoffFailed reports only the back-end part gone:
//     the flow stays to carry its answer and is reported closed again
//     later.
//     Its Timeline holds when each handoff step the engine saw happened
//     (timeline.go; the per-connection records of frontend/timeline).
//   - Not events but inputs from the shims: the end of a response
//     (proto.Feedback.ResponseEnd) goes to ResponseEnded; a back-end that
//     died takes its flows down with Abort, which resets both ends.
//
// On the back-end, AddSplice installs a proto.Splice; the daemon's
// SpliceAck says OK only after AddSplice returned nil. The shim's
// one event, EvResponseDone, reports a served request (RequestID,
// ServiceTime, FirstByte, Bytes, ResponseEnd) and becomes a
// proto.Feedback.
//
// Neither engine is safe for concurrent use: one goroutine feeds it, so no
// lock is taken per packet. The back-end daemon runs one Shim per worker.
//
// # A front-end flow, state by state
//
// A flow (flow.go) is one client connection and, once dispatched, its C2.
// It has one state and one timer:
//
//	  SYN ──> SYN-ACK carrying a cookie; nothing is kept
//	  final ACK with a valid cookie
//	    │
//	    v
//	reading ───── 400, 408, 431 ──────────────────> answering
//	    │ head complete: EvRequest                   ^  │ our FIN acked,
//	    v                                            │  │ or retries out
//	queued ────── Reject (503, 429) ────────────────>┤  v
//	    │ Dispatch: C2 SYN                           │ linger ─ Linger ─> gone
//	    v                                            │  ^
//	connecting ── RST, no SYN-ACK: 503 ─────────────>┤  │
//	    │ SYN-ACK: EvSplice                          │  │
//	    v                                            │  │
//	splice-wait ─ no SpliceAck in time, Reject ─────>┤  │
//	    │ SpliceAcked: the request goes on C2        │  │
//	    v                                            │  │
//	spliced ───── a refused follow-up, once the ────>┘  │
//	    │         last response has ended               │
//	    └──────── both FINs, RST, Abort, idle ──────────┘
//
// Abort, from any state but linger, resets both ends and goes to linger.
//
// No state before the handshake (cookie.go): a SYN is answered with a
// SYN-ACK whose ISN is a SYN cookie. It carries the parity of its epoch
// (64 s), the client's MSS (the largest table value not above it, so a
// small MSS stays small), window scale and SACK offers, and a SipHash
// MAC keyed with that epoch's key, HMAC-SHA-256 of CookieSecret and the
// epoch number; the final ACK rebuilds them. When the client offers timestamps
// the option bits ride in the low bits of our TSval instead (the client
// echoes them; our TSval moves back, never forward, to hold them), and
// the MAC takes 31 bits of the ISN rather than 23. A cookie verifies only
// in its epoch and the next (64 to 128 s): a replayed final ACK meets
// keys that never made it. Besides our MSS, the SYN-ACK answers only
// options the client offered. A SYN to a port nobody listens on, and a
// final ACK whose cookie does not verify, get a RST, at most RSTRate a
// second (the rest are counted in RSTsSuppressed). With LinkAnswersSYNs
// a TC program on the link sends the SYN-ACK of the SYNs laid out as
// Linux lays them out, and the engine, which knows them by the same rule,
// sends nothing for those (fe_linksyn.go).
//
// reading (fe_client.go): in-order bytes are buffered (up to RecvBuffer,
// the window we advertise being what is free) and acknowledged; a data
// segment out of order gets a duplicate ACK. Each arrival re-parses the
// head: complete means queued and EvRequest; too large 431; malformed
// 400; the client's FIN before a complete head 400 (or a quiet close, if
// it sent nothing).
// Bytes past the first request (a pipelined second one) are un-accepted
// (the client will send them again, and they are scheduled on their own);
// once queued, request body bytes still arrive into the buffer, and a
// frame beyond the request is kept for after the splice.
//
// connecting (fe_handoff.go): Dispatch takes a handoff port (each
// back-end has the whole range; a linear probe from the last port taken
// towards it, from a start derived from the cookie secret, so a restarted
// front-end does not walk into its predecessor's tuples) and sends the
// C2 SYN with ISN = the client's ISN and the options the client's SYN
// offered (its MSS as the cookie kept it), nothing else. A RST from the
// back-end that acknowledges the SYN, or no SYN-ACK after three
// retransmissions, answers the client 503; a challenge ACK (an old
// connection still holds the tuple) is reset and the SYN sent again,
// within the rate limit of challenge ACKs.
//
// splice-wait: the SYN-ACK gives the back-end's ISN, MSS, window scale and
// timestamps; the engine computes the translation numbers and emits
// EvSplice, and sends nothing: the request's first segment, once the
// shim confirmed, completes the back-end's handshake (a SYN-ACK that comes
// again, after a long wait for a slot, is ACKed then). Client frames arriving now are copied
// and held, at most HoldFrames of them; the rest are dropped and the
// client resends them. Without SpliceAcked the client gets a 503. Nothing
// of the request has reached the server yet, so every 503 here is safe to
// retry.
//
// With SpliceAtSYN (fe_atsyn.go, the daemon's default) the Splice goes
// with the C2 SYN instead, when the request is buffered whole and not
// rewritten: the shim completes it from the SYN-ACK as that passes and
// acknowledges it then, so the SpliceAck comes with the SYN-ACK (or just
// before it: SpliceAcked and HoldSplice in connecting are remembered and
// done at the SYN-ACK).
//
// spliced (fe_forward.go): SpliceAcked sends the buffered request on C2,
// then the held frames. From then on every client segment is translated
// in place onto C2 and the front-end acknowledges no client data of its
// own. It still watches the request stream for keep-alive follow-up
// requests (fe_keepalive.go: bytes from the next head on are held until
// Admit, each held segment's ACK, SACK and window sent on at once in a
// header-only segment; a chunked body is followed to its end with
// httphead.Chunked, already while the first request is buffered, so the
// request behind it is held too), and a refused follow-up takes the
// connection back (fe_refuse.go: once the shim reported where the last
// response ended and the client acknowledged all of it, C2 is reset and
// the front-end answers from that point in the stream; if the end is not
// known within RefuseWait of the client's last progress, the connection
// is reset). No request reaches the back-end unscheduled: what the
// front-end cannot follow -- a follow-up head that does not parse (400)
// or is over MaxHead (431), a partial head at the client's FIN, a
// malformed chunked body (400) -- is never forwarded but answered the
// same way, and the connection closes.
//
// answering (fe_answer.go): the front-end's own response and FIN, sent
// reliably. linger: EvClosed has been emitted; late segments still find
// the flow (a spliced flow's retransmitted FINs are still forwarded, an
// answered flow's FIN is consumed and acknowledged) until Linger passes
// and the flow is freed (its record and request buffer are kept, up to a
// bound, for the next connections). A new SYN on a lingering tuple frees
// it at once and starts a new connection.
//
// # Validation
//
// Anyone on the segment can claim a client's tuple or a back-end's address,
// so every segment is checked before it changes a flow (fe_validate.go,
// RFC 5961). A client's RST counts only at exactly the next sequence number
// (rcvNxt while the front-end is the client's peer, the end of everything
// the client sent once spliced); in the window it gets a challenge ACK,
// outside it nothing. A SYN on a live flow gets a challenge ACK. Other
// segments need ACK, a sequence number in the window and an ACK number
// between what the client acknowledged less the largest window it offered
// and the end of what can have been sent (our own numbers, or once
// spliced the right edge of the client's windows, which the back-end
// cannot pass); refused ones are challenged. A spliced client's challenge
// carries a sequence number just below its window, so a live client
// ignores its ACK number and the front-end never acknowledges request
// bytes for the back-end. On C2 only the back-end's address, port and MAC,
// with numbers in its space, count: its RST at exactly the client's
// rcv_nxt in back-end numbers (in the window: a challenge ACK on C2), a
// SYN-ACK that acknowledges ISN+1. Anything else to a handoff port, live
// or not, is dropped without an answer, so live ports cannot be told from
// free ones. Challenge ACKs are rate-limited per flow (one per 500 ms, as
// Linux's tcp_invalid_ratelimit) and per engine (ChallengeACKLimit, each
// second's budget drawn from a keyed hash). The MSS either side
// announced is raised to at least minMSS (64) before segmenting, and the
// ACK-storm detector sees only accepted segments. Abort resets a spliced
// client at its latest ACK; if the client had more than it acknowledged,
// it answers with a challenge ACK, which the lingering flow answers with
// a RST at exactly its ACK number (TestAbortedFlowResetsTheClientAtItsOwnAck).
//
// # Sequence spaces: who owns which number
//
//	                 client <-> VIP         C2: handoff <-> back-end
//	request bytes    from client ISN c   =  from c (C2's SYN used c),
//	                                        + the request offset past a
//	                                        rewritten target
//	reply bytes      from ISN_f (cookie) =  from ISN_b, + seqDelta
//	client's TSval   the client's clock  =  the same, never rewritten
//	reply TSval      back-end's + tsOffset  the back-end's clock
//	request windows  client's own scale  =  the same (C2 offered it)
//	reply windows    win << wsB >> wsF      the back-end's scale wsB
//
// The client owns c and its TS clock; the front-end owns ISN_f and its TS
// clock (milliseconds of engine time, like Linux's); the back-end's kernel
// owns ISN_b and its clock. The front-end computes the translation once,
// from the back-end's SYN-ACK (c2Established), and the proto.Splice carries
// it to the shim unchanged for the connection's life:
//
//   - seqDelta = ISN_f - ISN_b (mod 2^32). The shim adds it to the seq of
//     every reply; the front-end subtracts it from the client's ACK
//     number and every SACK edge, and from an ICMP's embedded seq.
//     Request-direction sequence numbers need nothing (C2 began at c)
//     until a request's target is rewritten: see Request rewriting.
//   - tsOffset = (our TS clock now) + 1 - the SYN-ACK's TSval, so that
//     translated TSvals continue after every TSval the front-end sent
//     the client itself. The shim adds it to every reply's TSval; the
//     front-end subtracts it from the client's TS echo. When the front-end
//     takes a connection back to answer a refused follow-up, its own TSvals
//     never go below the last one the client echoed. A Splice sent with
//     the SYN fixes the "now + 1" at dispatch (tsBase) and lets the shim
//     subtract the SYN-ACK's TSval itself; our own TSvals then stay one
//     behind the translated ones by lagging our clock by the time the
//     SYN-ACK took beyond that millisecond (fe_atsyn.go).
//   - Window scales: wsF is ours towards the client (WScale, when the
//     client offered scaling), wsB the back-end's. Reply windows become
//     win << wsB >> wsF, clamped to 65535 and never rounded from non-zero
//     to zero. The client's windows go to the back-end unchanged: C2
//     offered the client's own scale.
//   - MSS: C2 offers the client's MSS, so no reply is too large for it.
//
// Segments the front-end makes up on C2 carry the client's last TSval
// (the back-end knows only the client's clock): the request and the ACK
// of the SYN-ACK echo the SYN-ACK's TSval, held follow-up bytes the
// client's own echo, translated. A RST must land at the receiver's rcv_nxt
// (RFC 5961): towards the back-end at the end of what reached it, towards
// a spliced client at the client's latest ACK.
//
// # Request rewriting
//
// Serving a cheaper content tree (issue 10) means the back-end reads
// another request-target than the client sent. The controller calls
// Rewrite(id, path) before Dispatch or Admit; the engine substitutes the
// bytes of the target's path (the query stays) and from then on keeps two request-direction spaces, the
// client's (c) and the back-end's (b), an offset apart past the target
// (rewrite.go has the picture). One correction point is kept per
// connection: a follow-up is rewritten only once the back-end has
// acknowledged the last new target (ErrRewriteBusy otherwise; the
// controller then admits it as it is).
//
//   - The front-end: every client segment goes onto C2 at b = c + offset
//     (fe_forward.go, fe_keepalive.go's sendC2); bytes of the replaced
//     target are never forwarded (a client's retransmission of them is
//     absorbed, its ACK, SACK and window go on in a header-only segment at
//     the end of what reached C2, never below it); the new target is the
//     front-end's, resent from its copy until the back-end acknowledges it
//     (the first request's with the rest of the buffered request, a
//     follow-up's by the request timer). The client's ACK and SACK name
//     reply bytes and move by seqDelta alone.
//   - The shim: every reply's ACK number and SACK edges, which name request
//     bytes, move back into the client's numbers (shim_offset.go); an ACK
//     inside the new target becomes the old target's start, so the client
//     keeps resending (and the front-end absorbing) until the back-end has
//     all of the new target.
//   - How the shim learns the offset, before the kernel can acknowledge a
//     byte of a new target: the first request's comes in the Splice
//     (SpliceRewrite, RewriteStart, RewriteEnd, RequestOffset), which the
//     shim confirms before the request is sent. A follow-up's comes in band:
//     every C2 segment carrying a byte of the new target carries a TCP
//     option (kind 254, ExID "QS": the new point's numbers) that the shim
//     reads on the segment's way to the kernel, which ignores it. No round
//     trip, no ordering to prove: the kernel cannot acknowledge what it has
//     not received. The front-end blanks such an option in a client's own
//     segments. The shim then copies reply headers to the front-end again
//     until one acknowledges the new target, so the front-end's request
//     timer sees the back-end's ACKs.
//
// # Who retransmits what
//
//   - The handshake: the client. The front-end keeps nothing for a SYN;
//     each retransmitted SYN gets a fresh cookie SYN-ACK.
//   - Request bytes before the front-end acknowledged them: the client.
//     After: the front-end, because only it still has them. It sends them
//     on C2 at SpliceAcked and resends from the back-end's highest ACK
//     every RTOMin << retries until the back-end has acknowledged all of
//     them (MaxRetries, then Abort). It sees those ACKs only because the
//     shim sends it a header-only copy of every reply until one
//     acknowledges the request's end (Splice.RequestEnd), and of every
//     reply with FIN or RST; copies carry no payload, so the front-end
//     never receives the response.
//   - Frames held during splice-wait: forwarded once; dropped ones the
//     client resends. Follow-up bytes held until Admit: nobody
//     acknowledged them, so the client keeps retransmitting them; the
//     front-end sends them once when admitted.
//   - A rewritten follow-up's new target: the front-end, from its copy,
//     RTOMin << retries until the back-end acknowledges it (the shim
//     copies reply headers again until then); the client's resends of
//     the old target are absorbed (see Request rewriting).
//   - Everything the client sends after the splice, and every reply: the
//     two kernels, end to end. The engines translate each copy alike.
//   - The C2 SYN (three retransmissions, doubling from HandoffTimeout) and
//     the front-end's own answers (go-back-N from the oldest unacknowledged
//     byte, RTOMin doubling, MaxRetries): the front-end.
//   - The Splice message: the controller resends it until acknowledged
//     (at most SpliceTries times);
//     the shim takes a repeated Splice for the same request as a no-op.
//
// # The shim
//
// A spliceEntry (shim.go) is one spliced connection, found by its reply
// tuple (server -> handoff address) and by request ID: the client's and
// VIP's addresses and ports, the client's next-hop MAC (the source MAC of
// the client's frames at the front-end), seqDelta, tsOffset, the window
// shift, RequestEnd and whether the back-end has acknowledged it,
// both FINs, and the service-time measurement.
//
// A frame from the host on a spliced tuple, other than a SYN, is
// translated (shim_translate.go); everything else passes to the other
// side unchanged, header and all: the SYN-ACK (the front-end needs the
// back-end's own numbers), traffic of unspliced connections, and frames
// that do not parse. A reply it cannot translate safely (options that do
// not parse, a vnet header that does not fit) is dropped and counted.
// Client segments towards the host on a spliced tuple are watched on
// their way.
//
// What the shim believes is guarded (shim_guard.go). AddSplice takes a
// Splice only for a C2 handshake whose SYN-ACK it saw leave the kernel
// within HandshakeWindow, on one of the web ports, with numbers that
// agree with it, and once; the table of handshakes and of entries is
// bounded. Wire segments of a spliced connection are judged as the kernel
// will judge them (RFC 5961): a RST ends the entry only at exactly the
// sequence the kernel expects, other segments count only inside the
// window it announced; the rest still goes to the kernel, which answers
// it, but changes nothing here. The kernel's own RST or FIN is final.
//
// Service time, one request at a time: it starts when new request bytes
// arrive (a retransmission is not a new request) and runs to the last
// response byte the server sent. The response is over when the server has
// sent every byte its head announced (the slot is free, whatever the
// client's pace); or, with no length in the head, once the client has
// acknowledged everything and the server stayed quiet for ResponseQuiet;
// or when the next request arrives, a RST, or the entry expires. The
// entry lingers Linger after both FINs or a RST and is forgotten after
// IdleTimeout without a packet.
//
// # Handoff connections kept alive (pooled C2s)
//
// With FrontEndConfig.PoolC2 a C2 outlives its client connection and
// serves the next request to its back-end (fe_pool.go, shim_pool.go;
// docs/pooled-c2.md has the whole design and its measurements):
//
//   - A C2 is pooled when its client connection ends with nothing under
//     way: a keep-alive client's FIN is not forwarded (it waits for the
//     last Feedback, at most PoolFINWait) and the front-end closes the
//     client's side itself. A client's "Connection: close" is blanked
//     in the request (same length) so the server keeps C2; the shim writes
//     close into the response's "Connection: keep-alive" and ends the
//     response with a FIN the server never sent, so the client closes
//     second, as with the server's close (Feedback.CloseSent, FINSent).
//   - Dispatch takes a pooled C2 whose SYN options fit the client's
//     instead of opening one, and sends a Splice with Reuse: the
//     client's sequence numbers go on C2 through a correction point that
//     changes no bytes (rewrite.go, before = after = cliDelta), its
//     TSvals through cliTSOff, so C2's keep growing; the shim maps the
//     server's ACK, SACK and TS echo back, and drops replies from before
//     the move (the last client's).
//   - The request may go with the Splice (Reuse.Early), marked with the
//     reuse option, which the shim holds until the Splice is in; the
//     server's ACK of it, copied to the front-end, stands for the
//     SpliceAck (EvSpliceTaken).
//   - Pooled C2s are reset after PoolIdle, and when their server closes
//     them.
//
// # Super-frames and partial checksums
//
// On links with virtio-net headers (link.BatchLink) a reply of up to
// 64 KiB that the host kernel left to TSO reaches InputVNet whole, marked
// NEEDS_CSUM. The shim translates its headers once: the sequence number is
// the first byte's, every field keeps its size, so the vnet header still
// fits and leaves unchanged (OutFrame.VNet), and the device cuts and
// checksums the segments. A NEEDS_CSUM frame's checksum field holds the
// uncomplemented pseudo-header sum, so the address changes go in as a
// plain one's-complement sum (wire.AdjustPartialChecksum, through
// TCP.UpdatePartialAddrs) and the other rewrites leave the field alone;
// a complete checksum is updated field by field with RFC 1624. A reply
// whose vnet header describes anything else is dropped and counted, never
// passed untranslated. Copies to the front-end get full checksums and the
// zero header. The front-end engine sees no super-frames (its daemon cuts
// them) and completes a partial checksum itself; a link without vnet
// headers finishes offloaded frames in software on write.
//
// # Ingress checks
//
// Before either engine acts on a frame from the network (ingress.go; the
// shim judges frames from the wire for its host, not what its host's
// kernel sends), it drops and counts frames with a bad IPv4 header or TCP
// checksum, a martian source (0/8, 127/8, 224/4, 240/4), its own address
// as the source (VIPs and handoff address; the host's at the shim), a
// broadcast or multicast source MAC, TTL 0 or IPv4 options (dropped, not
// stripped: see ingress.go). Nothing such a frame says gets an answer, a
// place in the scheduler, or a way to a back-end's kernel. The TCP
// checksum is verified in software (a 64-bit one's-complement sum) unless
// the vnet header vouches for it: DATA_VALID (the kernel verified it) or
// NEEDS_CSUM (made on this host; the front-end completes it first).
//
// # Timers
//
// Each flow (and each shim entry) has one current deadline, and each
// engine one set of them with lazy deletion (timers.go: FIFO lanes for
// the deadlines a fixed span after their push, which fall due in push
// order, and a queue.Heap for the rest): moving a deadline earlier
// pushes a new entry and leaves the old one, which Tick skips because it
// no longer matches the owner's armed entry.
// A deadline that moves later (the idle timer every packet refreshes, a
// flow's next state) is not pushed at all; when the earlier entry fires,
// the owner finds the later time and pushes that. NextDeadline may therefore report a stale, earlier time: Tick
// then has nothing to do. The front-end's deadlines, by state:
//
//	reading       HeadTimeout (10 s)             -> 408; nothing received
//	              yet: reset and forgotten at once
//	queued        IdleTimeout (15 min) -> 503, a backstop: the
//	              controller's queue timeouts (10 s) reject it first
//	connecting    HandoffTimeout (1 s), doubling, 3 retries -> 503
//	splice-wait   3 x HandoffTimeout -> 503; held: IdleTimeout -> 503
//	spliced       request unacknowledged: RTOMin << retries, resend
//	              (MaxRetries, then reset both ends);
//	              refused follow-up: RefuseWait (10 s) -> reset;
//	              both FINs: Linger after the last client packet -> linger;
//	              back-end's FIN only: HalfCloseTimeout (30 s) after it
//	              -> reset both ends, handoff port freed at once;
//	              else IdleTimeout after it -> reset both ends
//	answering     RTOMin << retries, resend; MaxRetries -> linger
//	linger        Linger (5 s) -> gone
//
// A flow that was never handed off lives at most FlowLifetime (30 s) in
// all, whatever its state: then it is reset and forgotten. The limits on
// flows and handoff ports, and why the tables shrink after a flood, are in
// limits.go.
//
// The shim's: the end of ResponseQuiet after a drained response, Linger
// after both FINs or a RST, IdleTimeout otherwise.
//
// # The traps, and the tests that pin them
//
// docs/architecture.md §4 lists the mistakes a splicer can make.
// Each is answered in the code and pinned by tests:
//
//  1. Window scale (rescaleWindow):
//     TestRescaleWindowClampsAndNeverClosesAnOpenWindow,
//     TestShimTranslatesSplicedReplies.
//  2. Timestamps, translated both ways and continuing the front-end's:
//     TestC2SynAckGivesSpliceAndTheRequestCompletesTheHandshake,
//     TestForwardedClientSegmentsAreTranslatedOntoC2 (a wrapping client
//     clock), TestShimTranslatesUnalignedTimestamps,
//     TestForwardingTranslatesUnalignedOptions,
//     TestRefusedFollowUpIsAnsweredInItsStream.
//  3. SACK edges name reply bytes:
//     TestForwardedClientSegmentsAreTranslatedOntoC2.
//  4. Option hygiene: TestSynAckCarriesCookieAndOnlyOptionsTheClientOffered,
//     TestSynAckAndC2SynNeverReflectUnknownOptions,
//     TestDispatchOpensC2WithClientISNAndOnlyTheOptionsTheClientOffered.
//  5. Incremental checksums across wrap:
//     TestForwardingKeepsChecksumsExactForRandomNumbers, and in wire
//     TestIncrementalRewriteEqualsFullRecompute, TestChecksumZeroForms,
//     TestSeqAcrossWrap; every fuzzer checks that
//     each emitted frame parses, with exact checksums whenever the input's
//     were (fuzz_test.go).
//  6. Client frames during the handoff reach the back-end exactly once:
//     TestClientFramesDuringSpliceWaitAreHeldBoundedThenForwarded,
//     TestPipelinedRequestWhileQueuedIsNotHandedOverWithTheFirst,
//     TestSpliceAckedSendsTheRequestExactlyAndRetransmitsUntilTheShimCopyAcksIt.
//     The Splice before the first reply:
//     TestHeldSpliceSendsTheRequestOnlyWhenReleased, and in the lab
//     TestDelayedSpliceNeverLeaksUntranslatedReplies (tools/e2e).
//  7. One direction seen after the splice: the shim's copies,
//     TestShimCopiesHeadersToTheFrontEndUntilTheRequestIsAcked.
//  8. ACK storms (fe_storm.go): TestAckStormIsCut,
//     TestDuplicateAcksWithProgressAreNotAStorm.
//  9. ICMP fragmentation-needed for a reply:
//     TestICMPFragNeededForAReplyReachesTheBackendInC2Numbers.
//  10. Port reuse on a lingering tuple:
//     TestSynOnLingeringTupleStartsANewConnection.
//  11. Partial checksums and super-frames: TestShimTranslatesASuperFrameOnce,
//     TestShimKeepsAPartialChecksumPartial,
//     TestShimCopiesASuperFrameHeaderWithFullChecksums,
//     TestShimAccountsForASuperFrameAsForItsSegments,
//     TestShimPassesSuperFramesAndGROFramesWhole,
//     TestShimDropsRepliesWhoseVNetHeaderDoesNotFit, and in wire
//     TestRFC1624OnAPartialFieldIsWrong.
//  12. Request rewriting (content adaptation) shifts request-direction
//     numbers from a correction point on (rewrite.go):
//     TestRewriteRecordMapsBothWaysAcrossWrap,
//     TestRewrittenFirstRequestShiftsTheClientsSequenceNumbersOnC2 (every
//     client variant, a target across 2^32),
//     TestClientRetransmissionOfTheReplacedTargetIsAbsorbed,
//     TestRewrittenFollowUpChangesTheOffsetMidConnection (the resent
//     target), TestRewriteWaitsForTheLastRewrittenTarget,
//     TestShimTranslatesTheAckAndSACKOfARewrittenRequest,
//     TestShimLearnsAFollowUpsOffsetFromTheRewriteOption,
//     TestShimTranslatesARewrittenRequestsAckInAPartialChecksumFrame,
//     TestShimRefusesARewriteOutsideTheRequest,
//     TestClientCannotSetTheOffsets, FuzzRewriteOption,
//     TestRewrittenConnectionsForwardAndTranslateWithoutAllocating,
//     TestKeepAliveConnectionWithRewrittenRequestsInMemory and
//     FuzzRewrittenRequestStreams (both engines, random streams, rewrites,
//     losses and retransmissions).
//  13. A back-end dying mid-response: Abort,
//     TestAbortResetsBothEndsAtTheClientsNextSequence; the refund and the
//     avoidance are the controller's (TestBackendDeathRefundsAndReregistration
//     in frontend/controller, TestBackendDeathAndReturn in tools/e2e).
//  14. Blind and spoofed segments (RFC 5961, see Validation): the
//     TestAdversarial* tests of adversarial_tcp_test.go, one per attack
//     (blind RSTs in every state, SYNs, ACKs of data never sent, made-up
//     duplicate ACKs, spoofed C2 RSTs, the handoff-port oracle, a foreign
//     MAC, a tiny MSS), FuzzFrontEndValidation and FuzzC2SynAckMSS.
//  15. Pooled C2s (fe_pool.go, shim_pool.go):
//     TestShimMovesAnIdleC2ToTheNextClient (every translation row, the
//     last client's replies dropped), TestShimMovesOnlyAnIdleC2,
//     TestPooledC2ServesTheNextClient (both engines, two clients through
//     one C2, PAWS on both sides), TestPooledC2ForAClientThatAskedToClose,
//     TestShimEndsAClosingResponseWithAFIN,
//     TestClientFINWaitsForTheFeedback,
//     TestPooledC2EarlyRequestWaitsAtTheShim, and in the lab
//     TestPooledC2sServeClientAfterClient and
//     TestPooledC2sForClientsThatAskToClose (tools/e2e).
//
// Bounded state (limits.go), each shown by a TestAdversarial test:
// TestAdversarialFloodFromOneSourceIsCappedWhileAnotherIsServed,
// TestAdversarialCookieAckOverTheLimitIsReset,
// TestAdversarialFullTableEvictsTheOldestHeadlessFlow,
// TestAdversarialSilentClientIsFreedAtTheHeadDeadline,
// TestAdversarialPartialHeadClientIsFreedAtTheFlowLifetime,
// TestAdversarialFloodMemoryReturnsAfterExpiry,
// TestAdversarialIdleKeepAliveConnectionsDoNotExhaustHandoffPorts,
// TestAdversarialPortRangeIsReleasedAfterTheBackendsFIN.
//
// Beyond the list: TestSplicedFlowTimerHeapDoesNotGrowPerPacket (the lazy
// timers), TestWholeLoopInMemory (both engines between a scripted client
// and server, end to end), and the fuzzers' property that an engine forgets
// everything once its timers have run.
package splice
