package wire

// PortsHashMul is Knuth's multiplicative hashing constant, 2^32 over the
// golden ratio.
const PortsHashMul = 0x9e3779b1

// PortsHash spreads TCP connections over n workers by their ports alone:
// a connection goes to PortsHash(sport, dport) % n. The ports are XORed,
// so both directions agree, and addresses are left out, so a translation
// that rewrites them (the shim's, the front-end's C2) keeps a connection
// on its worker. The kernel computes the same value in the classic BPF
// program of an AF_PACKET fanout group (link.FanoutPorts); the front-end
// engine uses it to pick handoff ports whose replies come back to the
// shard that owns the client (splice/shard.go).
//
// Plain sport ^ dport would do for ports that differ in their low bits,
// but Linux gives connect(2) even ports first (odd ones are kept for
// bind), so every connection from Linux clients to port 80 would land on
// the same worker of two. Multiplying by PortsHashMul and keeping the top
// 16 of the 32 bits brings every bit of the XOR into the low bits the
// modulo reads.
func PortsHash(sport, dport uint16) uint32 {
	return (uint32(sport^dport) * PortsHashMul) >> 16
}
