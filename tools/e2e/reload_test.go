package e2e

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

func frontendPID(t *testing.T, l *lab.Lab) int {
	for _, p := range l.Processes() {
		if p.Name == "frontend" && p.Alive {
			return p.PID
		}
	}
	t.Fatal("front-end not running")
	return 0
}

// waitReloads polls /status until the reload counters reach the wanted
// values (SIGHUP is handled asynchronously by the daemon's loop).
func waitReloads(t *testing.T, l *lab.Lab, ok, failed uint64) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := frontendStatus(t, l)
		if st.Reloads == ok && st.ReloadsFailed == failed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reloads %d failed %d, want %d and %d", st.Reloads, st.ReloadsFailed, ok, failed)
		}
		time.Sleep(50 * time.Millisecond) // polling the daemon's status
	}
}

// TestCapAnswers429AndReloadKeepsServing: a customer over its cap gets
// 429 from the front-end; a SIGHUP with a broken file keeps the running
// configuration (the cap still applies, requests are still served); a
// SIGHUP with a good file that lifts the cap takes effect at once.
func TestCapAnswers429AndReloadKeepsServing(t *testing.T) {
	l := creditLab(t, 2, []lab.Customer{{Name: "A", Domains: []string{"a.example"}, Reservation: 3, Cap: 5}},
		"  cap_window: 2s")
	burst := func() (ok, tooMany int) {
		for i := 0; i < 25; i++ {
			f := curlGet(t, l, "c1", vipURL(8080, 1<<10), "-H", "Host: a.example")
			switch f.status {
			case 200:
				ok++
			case 429:
				tooMany++
			default:
				t.Fatalf("status %d", f.status)
			}
		}
		return
	}
	ok, tooMany := burst()
	if tooMany == 0 || ok == 0 {
		t.Fatalf("with a cap of 5 req/s: %d served, %d refused with 429; want both", ok, tooMany)
	}
	cfgFile := l.Config().FrontendConfig
	good, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := frontendPID(t, l)

	// A broken file: refused, the old configuration keeps serving.
	if err := os.WriteFile(cfgFile, append(append([]byte(nil), good...), []byte("bogus_key: 1\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGHUP)
	waitReloads(t, l, 0, 1)
	time.Sleep(2 * time.Second) // let the cap's 2 s window refill
	if ok, tooMany := burst(); ok == 0 || tooMany == 0 {
		t.Errorf("after a refused reload: %d served, %d refused; the old cap should still apply", ok, tooMany)
	}

	// A good file without the cap: applied.
	lifted := lab.FrontendYAML(l.Config().StateDir, 2, 5, []lab.Customer{{Name: "A", Domains: []string{"a.example"}, Reservation: 3}}, "  cap_window: 2s")
	if err := os.WriteFile(cfgFile, []byte(lifted), 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGHUP)
	waitReloads(t, l, 1, 1)
	if ok, tooMany := burst(); tooMany != 0 || ok != 25 {
		t.Errorf("after lifting the cap: %d served, %d refused with 429", ok, tooMany)
	}
	if frontendPID(t, l) != pid {
		t.Error("the front-end restarted")
	}
}
