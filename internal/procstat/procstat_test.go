package procstat

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A thread that sleeps and is woken five times counts at least five
// more wake-ups; a thread that does not exist is an error.
func TestWakeUpsCountsAThreadsSleeps(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	before, err := WakeUps(0, tid)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		time.Sleep(time.Millisecond) // the locked thread itself sleeps
	}
	after, err := WakeUps(0, tid)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 5 {
		t.Errorf("%d wake-ups after 5 sleeps", after-before)
	}
	if _, err := WakeUps(0, 1<<30); err == nil {
		t.Error("no error for a thread that does not exist")
	}
}
