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
// client's MAC) and the two sequence numbers that bound what it may take
// (AllowFrom, RespEnd; splice/shim_fastpath.go says why).
type FastPathEntry struct {
	VIP, Client  IP4
	VPort, CPort uint16
	ClientMAC    MAC
	SeqDelta     uint32 // added to the server's sequence numbers
	TSOffset     uint32 // added to its TSvals, if TS
	TS           bool   // the connection uses timestamps: translate TSval
	Scaled       bool   // rescale the window by WindowShift
	WindowShift  int    // win << WindowShift (negative: >>), as rescaleWindow
	AllowFrom    Seq    // every reply the kernel gave the shim ends at or before this
	RespEnd      Seq    // the response ends here: a reply reaching it is the shim's
}
