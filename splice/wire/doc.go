// Package wire holds typed views over the bytes of the headers qsplice
// touches: Ethernet, ARP, IPv4 and TCP with its options, plus the Internet
// checksum (full and RFC 1624 incremental) and wrap-safe sequence arithmetic.
//
// Place in the data flow: every frame that enters the splice engine (package
// splice) is validated once by Parse, which records where each header starts
// and ends. After that the views are plain byte slices with getters and
// setters that cannot run past the validated bounds, so the per-packet path
// reads and rewrites headers in place without allocating and without
// gopacket. gopacket is used in tests and tools to check these views against
// an independent decoder.
//
// The views do not copy: a view aliases the frame buffer it was made from.
package wire
