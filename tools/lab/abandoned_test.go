package lab

import (
	"bufio"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// TestAbandonedLabsAreThoseWithNothingRunning builds the namespaces of
// two labs, as a killed run leaves them, and starts a process in one of
// them: only the empty lab is abandoned, only once it is old enough, and
// a name the caller does not want is never listed; Prune removes it.
func TestAbandonedLabsAreThoseWithNothingRunning(t *testing.T) {
	requireRoot(t)
	empty, busy := randomName(t), randomName(t)
	for _, name := range []string{empty, busy} {
		t.Cleanup(func() {
			if err := Down(name, t.TempDir()); err != nil {
				t.Error(err)
			}
		})
		for _, host := range []string{"sw", "b1"} {
			if err := netns.Add(nsPrefix(name) + host); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The shell says "in" once ip netns exec has put it in the
	// namespace, then becomes the sleep.
	sleeper := netns.Command(nsPrefix(busy)+"b1", "sh", "-c", "echo in; exec sleep 60")
	out, err := sleeper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "in\n" {
		t.Fatalf("the sleeper said %q, %v", line, err)
	}

	ours := func(name string) bool { return name == empty || name == busy }
	now := time.Now()
	got, err := Abandoned(ours, 0, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{empty}) {
		t.Errorf("abandoned %v, want [%s] (%s runs a process)", got, empty, busy)
	}
	if got, _ := Abandoned(ours, time.Hour, now); len(got) != 0 {
		t.Errorf("labs made just now are abandoned: %v", got)
	}
	if got, _ := Abandoned(func(string) bool { return false }, 0, now.Add(time.Second)); len(got) != 0 {
		t.Errorf("labs no one asked about are listed: %v", got)
	}
	// Prune takes down the abandoned one only.
	removed, err := Prune(ours, 0, now.Add(time.Second))
	if err != nil || !slices.Equal(removed, []string{empty}) {
		t.Errorf("Prune removed %v (%v), want [%s]", removed, err, empty)
	}
	if netns.Exists(nsPrefix(empty)+"sw") || !netns.Exists(nsPrefix(busy)+"b1") {
		t.Errorf("after Prune: %s still has namespaces, or %s lost its", empty, busy)
	}
}
