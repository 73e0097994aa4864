// Package flood is qsplice's own attack traffic generator, the attacker of
// the live adversarial tests (tools/e2e, make test-adversarial): a host on
// the same Ethernet segment as the front-end that writes raw frames with
// an AF_PACKET socket (splice/link) and builds them with splice/wire.
//
// Two modes:
//
//   - ModeSYN: a SYN flood. Every SYN has a source address drawn at random
//     from SpoofPrefix (198.18.128.0/17, the upper half of the lab's
//     benchmarking range), a random source port and a random ISN. No other
//     range can be configured: the check is in code (CheckSpoofPrefix) and
//     every frame is checked again as it is built, so a mistake in a test
//     or on a command line cannot send spoofed traffic from addresses that
//     belong to someone. The front-end's SYN-ACKs come back to this host's
//     MAC, for addresses its kernel does not own, and are counted.
//   - ModeHeads: a state-exhaustion attacker. From ONE real source address
//     it completes handshakes (the SYN-ACK, a SYN cookie, is read on the
//     same socket and answered), sends a partial request head on the final
//     ACK and then stays silent, as a client that never finishes its
//     request does. No kernel sockets are involved, so one host can hold
//     100,000 such flows (source ports times target ports). The source
//     address must not be one the host's kernel owns, or the kernel would
//     reset every SYN-ACK it has no socket for; the generator answers ARP
//     for it itself.
//
// The pure parts (SynMaker, Heads) build and read frames; Run owns the
// socket, the clock and the pacing, and reports a Summary.
package flood
