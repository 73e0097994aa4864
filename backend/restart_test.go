package backend

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
)

// TestDaemonReleasesItsControlSocket: a daemon that stopped has released
// its control socket, so a new one in the same process (a restart, a
// reload) binds the same port and registers. The control socket keeps
// its own descriptor, out of Go's netpoller, which closing the
// net.UDPConn it came from does not release.
func TestDaemonReleasesItsControlSocket(t *testing.T) {
	r := newDaemonRig(t, true, 1)
	for round := range 2 {
		stop := r.start(r.config())
		if _, from := recv[*proto.Register](r, 10*time.Second); from.Port() != 7401 {
			t.Fatalf("round %d: Register from %v", round, from)
		}
		if err := stop(); err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
	}
}
