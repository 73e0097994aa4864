//go:build race

package backend

// raceEnabled: the race detector's instrumentation makes some buffers
// escape that do not otherwise (see TestDaemonPacketPathAllocatesNothing).
const raceEnabled = true
