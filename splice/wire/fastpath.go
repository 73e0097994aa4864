package wire

// FastPathKey names a spliced connection the way its replies leave the
// back-end's kernel: server address, handoff address, server port,
// handoff port, each in network byte order, as the 12 bytes of the IPv4
// header's addresses followed by the TCP header's ports. It is the key of
// the kernel's reply fast path (splice/link/replyfast.go) and what the
// shim's engine names a connection by when it tells the daemon to install
// or remove one (splice.Output.FastPaths).
type FastPathKey [12]byte

// MakeFastPathKey returns the key of replies from src:sport to dst:dport.
func MakeFastPathKey(src, dst IP4, sport, dport uint16) FastPathKey {
	var k FastPathKey
	copy(k[0:4], src[:])
	copy(k[4:8], dst[:])
	k[8], k[9] = byte(sport>>8), byte(sport)
	k[10], k[11] = byte(dport>>8), byte(dport)
	return k
}

// FastPathEntry is what the kernel needs to translate a reply in the
// middle of a response as the shim's translateReply would: the rewrite
// (addresses, ports, sequence and timestamp offsets, window shift, the
// client's MAC), what it may take and the sequence numbers that bound it
// (splice/shim_fastpath.go says why).
type FastPathEntry struct {
	VIP, Client  IP4
	VPort, CPort uint16
	ClientMAC    MAC
	SeqDelta     uint32 // added to the server's sequence numbers
	TSOffset     uint32 // added to its TSvals, if TS
	TS           bool   // the connection uses timestamps: translate TSval
	Scaled       bool   // rescale the window by WindowShift
	WindowShift  int    // win << WindowShift (negative: >>), as rescaleWindow
	// AllowFrom: every reply the kernel left to the shim ends at or
	// before it (the kernel takes no reply while one that ends later
	// still waits for the shim).
	AllowFrom Seq
	// Middle: the kernel sends a reply that ends before RespEnd, where
	// the response ends, and tells the shim nothing of it.
	Middle  bool
	RespEnd Seq
	// Gen tells this connection from another on the same tuple (the
	// shim uses its request ID; 0 is taken as 1).
	Gen uint32
	// Echo: the kernel sends any other reply with data it can translate
	// and gives the shim the original, marked as sent (TTL 0), for the
	// rest of what the shim does with a reply.
	Echo bool
	// Shift: the connection is a pooled C2 serving a later client
	// (splice/shim_pool.go): the reply's ACK number loses AckDelta and
	// its TS echo TSEcrDelta, into the client's numbers, and a reply
	// that starts before SeqFloor (the last client's) is left to the
	// shim, which drops it.
	Shift      bool
	AckDelta   uint32
	TSEcrDelta uint32
	SeqFloor   Seq
}
