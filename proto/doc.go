// Package proto is the control protocol between the qsplice front-end and
// the back-end shims.
//
// # Where it sits
//
// The request path (client -> front-end -> back-end over C2) and the reply
// path (back-end shim -> client) carry TCP segments. Beside them runs this
// small control channel over UDP:
//
//	back-end shim                      front-end
//	   Register        ------------->   (back-end joins, says what it serves)
//	                   <-------------   RegisterAck (keepalive interval)
//	   Keepalive       <------------>   Keepalive (liveness, load)
//	                   <-------------   Splice (both 4-tuples, deltas, MAC)
//	   SpliceAck       ------------->   (shim ready to rewrite replies)
//	   Feedback        ------------->   (service time, bytes: feeds sched)
//	   Close           <------------>   Close (FIN, RST, timeout, death)
//
// The package holds no sockets: the daemons own the UDP sockets. Each of
// their event loops keeps a [Codec] ([NewFrontEndCodec] at the front-end,
// [NewBackEndCodec] at a shim), which numbers, seals and sends
// ([Codec.Append]) and checks and decodes ([Codec.Decode]) datagrams
// without allocating: it holds the keys, the replay windows and the
// decoded messages it reuses. [Marshal], [Append] and [Unmarshal] seal
// and open one datagram with an explicit header and key and no freshness
// state, for tests, tools and captures. Every message travels as exactly
// one datagram of at most [MaxDatagram] bytes.
//
// # Wire format
//
// All integers are big-endian. A datagram is a header, a body and an
// authentication tag:
//
//	offset size field
//	0      2    magic "QS" (0x51 0x53)
//	2      1    version, currently 3 (see [Version]); 2 added
//	            Feedback.ResponseEnd, 3 the sender fields below
//	3      1    message type (see [Type])
//	4      1    direction: 1 front-end -> back-end, 2 back-end ->
//	            front-end (see [Direction])
//	5      1    reserved, must be 0
//	6      2    body length N in bytes
//	8      4    back-end id: the sender if direction 2, the recipient
//	            if direction 1; never 0
//	12     8    the sender's incarnation
//	20     8    the sender's sequence number, from 1
//	28     N    body, laid out per message type below
//	28+N   16   tag: first 16 bytes of HMAC-SHA256(key, bytes 0 .. 28+N-1)
//
// Nothing may follow the tag. The key is that of the back-end the header
// names (see Keys), so everything in the header is authenticated along
// with the body.
//
// # Keys
//
// The front-end holds a master key; back-end n's key is
// HKDF-SHA256(master, no salt, info "qsplice control v3 backend n"), 32
// bytes ([DeriveKey]). A back-end is given only its own key, so one
// whose key leaks cannot speak for another back-end nor read what the
// front-end tells the others. Key files hold hex and must be private and
// random-looking ([LoadKey]); `qsplice-frontend genkey` makes a master
// key and `qsplice-frontend derivekey` a back-end's key from it.
//
// # Freshness and binding
//
// Every sender numbers its datagrams: its incarnation, a value that
// grows with each of its starts (the start time in Unix nanoseconds,
// [NewIncarnation]), and a sequence number that starts at 1 and grows by
// one per datagram it sends. The front-end numbers all it sends in one
// sequence, whichever back-end a datagram goes to; a back-end sees the
// gaps, which cost nothing.
//
// A receiver keeps a [ReplayWindow] per sender: the front-end one per
// back-end, a back-end one for the front-end. A datagram is accepted
// only if its sequence number was not accepted before and is less than
// [ReplayWindowSize] (1024) behind the highest accepted, in the newest
// incarnation seen from that sender. A datagram of an older incarnation
// is refused whatever its number ([ErrStale]); one of a newer
// incarnation starts a fresh window. Only a datagram that authenticated
// and decoded moves a window, so only a holder of the key can start a
// new incarnation, and a recorded datagram never can (its incarnation is
// not newer). A sender whose clock went back across a restart, below
// its previous start, is refused until its clock passes that start;
// after the front-end restarts it knows no back-end's incarnation, so
// until a back-end registers again a recorded Register of an earlier run
// of that back-end could register that earlier run (its own Register,
// newer, then replaces it).
//
// A receiver refuses a datagram travelling towards its sender
// ([ErrDirection]: a datagram reflected back, such as the front-end's
// probe), and a back-end one naming another back-end ([ErrPeer]). The
// back-end a body names (every message has a BackendID) must be the one
// the header names, and a back-end's Register and Keepalive must name
// the incarnation of the header ([ErrMalformed]). What the codec cannot know is the
// front-end controller's to check: that a back-end's datagram comes
// from the address it registered, and that a SpliceAck, Feedback or
// Close names a request of that back-end
// (frontend/controller). RequestIDs carry the front-end's per-start
// random prefix in their high 32 bits, so those of an earlier run never
// name a request of this one.
//
// Refusing a datagram before its body (everything an attacker without a
// key can send: short, bad magic, version, length, direction, back-end,
// tag, replayed or stale) allocates nothing; the daemons count refusals
// by reason ([RefusalReason]).
//
// Field types in the bodies: u8/u16/u32/u64 are unsigned integers; ipv4
// is 4 address bytes in network order; mac is 6 bytes; dur is a u64
// holding a non-negative [time.Duration] in nanoseconds (values above
// 2^63-1 are rejected).
//
// Register (type 1), back-end -> front-end, 27+2n bytes:
//
//	0  u32   BackendID
//	4  ipv4  IP           back-end kernel address
//	8  mac   MAC          back-end wire MAC
//	14 u16   ControlPort  UDP port where the shim takes Splice messages
//	16 u16   Capacity     max concurrent requests
//	18 u64   Incarnation  new value on every start of the back-end
//	26 u8    n            number of web ports, at most 64
//	27 u16*n WebPorts
//
// RegisterAck (type 2), front-end -> back-end, 20 bytes:
//
//	0  u32   BackendID
//	4  u64   Incarnation  echoed from Register
//	12 dur   KeepaliveInterval
//
// Splice (type 3), front-end -> back-end, 61 bytes (73 with bit 3 of Flags;
// 8+n more with bit 5; 17 more for a reused C2, 1 more with
// CloseResponses):
//
//	0  u64   RequestID
//	8  u32   Customer
//	12 ipv4  ClientIP     \
//	16 u16   ClientPort    | client-facing 4-tuple
//	18 ipv4  VIP           |
//	22 u16   VIPPort      /
//	24 ipv4  HandoffIP    \
//	28 u16   HandoffPort   | C2 4-tuple (front-end side, back-end side)
//	30 ipv4  BackendIP     |
//	34 u16   BackendPort  /
//	36 u32   SeqDelta     back-end seq + SeqDelta = client-facing seq
//	                      (bit 4: the client-facing ISN, ISN_f)
//	40 u32   TSOffset     back-end TSval + TSOffset = client-facing TSval
//	                      (bit 4: the client-facing TSval of the SYN-ACK's)
//	44 u8    Flags        bit 0 timestamps, bit 1 SACK, bit 2 window scale,
//	                      bit 3 rewritten request target, bit 4 sent with
//	                      C2's SYN (the shim completes it from the SYN-ACK;
//	                      WScaleBackend is then 0), bit 5 (with bit 4
//	                      only) the request carried for the shim to send,
//	                      bit 6 (with bit 5 only) a SYN-ACK acknowledging
//	                      the request in the SYN acknowledges the Splice
//	                      (the shim sends no SpliceAck then), bit 7
//	                      (with bit 6 only) the SYN asks for a cookie the
//	                      front-end keeps (the shim does not fill it)
//	45 u8    WScaleBackend   0..14
//	46 u8    WScaleFrontend  0..14
//	47 mac   ClientNextHopMAC
//	53 u32   RequestEnd   seq just past the bytes handed over on C2
//	57 u32   BackendID
//	61 u32   RewriteStart  \  only with Flags bit 3: back-end seq of the
//	65 u32   RewriteEnd     | rewritten target's first byte and just past
//	69 u32   RequestOffset /  it; back-end seq - RequestOffset = client
//	                          seq from RewriteEnd on
//	   u16   RequestWindow \  only with Flags bit 5, after the above:
//	   u32   RequestTSVal   | the window and TSval of the request's
//	   u16   n              | segment, and its n bytes (1..896), which
//	   n     Request       /  end at RequestEnd
//	   u8    1             \  only for a reused C2 (Reuse.On), after
//	   u32   ServerNext     | all of the above, and never with bits
//	   u32   FrontNext      | 3 to 7: extension 1, moving a C2 idle
//	   u32   ClientDelta    | since its last client's response to this
//	   u32   ClientTSOffset/  client (docs/pooled-c2.md)
//	   u8    2                only when the client asked to close
//	                          (CloseResponses): extension 2, after
//	                          extension 1 if both
//	   u8    3                only with extension 1, when the request
//	                          follows at once (Reuse.Early): extension 3,
//	                          last; another kind byte, or kinds out of
//	                          order, are refused
//
// SpliceAck (type 4), back-end -> front-end, 14+n bytes:
//
//	0  u64   RequestID
//	8  u32   BackendID
//	12 u8    OK           0 or 1
//	13 u8    n            reason length
//	14 n     Reason       free text, bytes kept as sent
//
// Feedback (type 5), back-end -> front-end, 34 bytes (8 more with
// FirstByte, 1 more with CloseSent):
//
//	0  u32   BackendID
//	4  u64   RequestID
//	12 dur   ServiceTime
//	20 u64   ResponseBytes
//	28 u16   Concurrency  requests in service on that back-end now
//	30 u32   ResponseEnd  the back-end's sequence number just past the
//	                      response's last byte (C2 numbers)
//	34 dur   FirstByte    optional: request arrival to the response's
//	                      first byte at the shim; absent means not
//	                      reported (a zero FirstByte is not sent, and refused)
//	   u8    CloseSent    optional, last: bit 0, the shim wrote close into
//	                      the response's head (Splice extension 2); bit
//	                      1 (with bit 0 only), it sent the client a FIN
//	                      at ResponseEnd; absent means neither (a 0 is
//	                      not sent, and refused)
//
// Keepalive (type 6), either direction, 22 bytes:
//
//	0  u32   BackendID
//	4  u64   Incarnation
//	12 u64   Seq
//	20 u16   Concurrency
//
// Close (type 7), either direction, 13 bytes:
//
//	0  u64   RequestID
//	8  u32   BackendID
//	12 u8    Reason       1 FIN, 2 RST, 3 timeout, 4 back-end dead
//
// # Decoding order
//
// [Codec.Decode] checks, in this order: the datagram holds at least a
// header and a tag ([ErrShort]); magic ([ErrBadMagic]); version
// ([ErrVersion]); the datagram holds the whole declared body and tag
// ([ErrShort]); direction ([ErrDirection]); back-end id ([ErrPeer]); tag
// ([ErrAuth], constant-time); nothing follows the tag and the reserved
// byte is zero ([ErrMalformed]); freshness against the sender's window
// ([ErrStale], [ErrReplay]); type ([ErrUnknownType]); each body field
// ([ErrMalformed], as a [*FieldError] naming message and field); no
// bytes left in the body, the body's BackendID is the header's, and so
// is the incarnation of a back-end's Register or Keepalive
// ([ErrMalformed]). Only then is the datagram marked in the window.
// [Unmarshal] makes the same checks but for freshness, and takes either
// direction and any back-end.
//
// Only authenticated bytes are ever interpreted beyond the fixed header,
// and the encoding is canonical: every datagram that decodes re-encodes,
// with the same key and header, to the same bytes.
package proto
