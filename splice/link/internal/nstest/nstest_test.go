package nstest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// netnsID names the network namespace the calling thread is in.
func netnsID() (string, error) {
	return os.Readlink("/proc/thread-self/ns/net")
}

func TestNewDoAndCleanup(t *testing.T) {
	RequireRoot(t)
	home, err := netnsID()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	t.Run("inner", func(t *testing.T) {
		name = New(t, "qs-nstest")
		if _, err := os.Stat(filepath.Join(netnsDir, name)); err != nil {
			t.Fatalf("namespace %s not created: %v", name, err)
		}
		var inside string
		if err := Do(name, func() error {
			var err error
			inside, err = netnsID()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if inside == home {
			t.Fatalf("Do ran in the caller's namespace %s", home)
		}
		sentinel := errors.New("from f")
		if err := Do(name, func() error { return sentinel }); !errors.Is(err, sentinel) {
			t.Fatalf("Do returned %v, want f's error", err)
		}
		if now, _ := netnsID(); now != home {
			t.Fatalf("caller's thread moved to %s", now)
		}
	})
	if _, err := os.Stat(filepath.Join(netnsDir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("namespace %s still present after its test ended: %v", name, err)
	}
}

func TestDoUnknownNamespace(t *testing.T) {
	RequireRoot(t)
	if err := Do("qs-nstest-does-not-exist", func() error { return nil }); err == nil {
		t.Fatal("Do entered a namespace that does not exist")
	}
}
