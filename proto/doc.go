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
// their event loops keeps a [Codec], which encodes ([Codec.Append]) and
// decodes ([Codec.Decode]) datagrams without allocating: it holds the
// keyed HMAC and the decoded messages it reuses. [Marshal], [Append] and
// [Unmarshal] do the same with a throwaway Codec, for callers that send or
// read a message now and then. Every message travels as exactly one
// datagram of at most [MaxDatagram] bytes.
//
// # Wire format
//
// All integers are big-endian. A datagram is a header, a body and an
// authentication tag:
//
//	offset size field
//	0      2    magic "QS" (0x51 0x53)
//	2      1    version, currently 2 (see [Version]); 2 added
//	            Feedback.ResponseEnd
//	3      1    message type (see [Type])
//	4      1    flags, must be 0
//	5      1    reserved, must be 0
//	6      2    body length N in bytes
//	8      N    body, laid out per message type below
//	8+N    16   tag: first 16 bytes of HMAC-SHA256(key, bytes 0 .. 8+N-1)
//
// Nothing may follow the tag. The key is shared by the front-end and all
// its back-ends; it may be empty (the tag is then computed with an empty
// key, which detects corruption but authenticates nothing). [LoadKey]
// reads a key file and insists on at least 16 bytes.
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
// Splice (type 3), front-end -> back-end, 57 bytes:
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
//	40 u32   TSOffset     back-end TSval + TSOffset = client-facing TSval
//	44 u8    Flags        bit 0 timestamps, bit 1 SACK, bit 2 window scale;
//	                      other bits must be 0
//	45 u8    WScaleBackend   0..14
//	46 u8    WScaleFrontend  0..14
//	47 mac   ClientNextHopMAC
//	53 u32   RequestEnd   seq just past the bytes handed over on C2
//
// SpliceAck (type 4), back-end -> front-end, 14+n bytes:
//
//	0  u64   RequestID
//	8  u32   BackendID
//	12 u8    OK           0 or 1
//	13 u8    n            reason length
//	14 n     Reason       free text, bytes kept as sent
//
// Feedback (type 5), back-end -> front-end, 34 bytes:
//
//	0  u32   BackendID
//	4  u64   RequestID
//	12 dur   ServiceTime
//	20 u64   ResponseBytes
//	28 u16   Concurrency  requests in service on that back-end now
//	30 u32   ResponseEnd  the back-end's sequence number just past the
//	                      response's last byte (C2 numbers)
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
// [Codec.Decode] (and so [Unmarshal]) checks, in this order: the datagram
// holds at least a header and a tag ([ErrShort]); magic ([ErrBadMagic]);
// version ([ErrVersion]); the datagram holds the whole declared body and
// tag ([ErrShort]); tag ([ErrAuth], constant-time); nothing follows the
// tag and header flags and reserved are zero ([ErrMalformed]); type
// ([ErrUnknownType]); each body field ([ErrMalformed], as a [*FieldError]
// naming message and field); no bytes left in the body ([ErrMalformed]).
//
// Only authenticated bytes are ever interpreted beyond the fixed header
// prefix, and the encoding is canonical: every datagram that decodes
// re-encodes, with the same key, to the same bytes.
package proto
