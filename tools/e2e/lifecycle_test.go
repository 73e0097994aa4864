package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// creditLab builds a lab whose front-end runs from a configuration file
// with the credit scheduler; it is removed when the test ends.
func creditLab(t *testing.T, backends int, customers []lab.Customer, schedulerExtra ...string) *lab.Lab {
	t.Helper()
	return creditLabWith(t, backends, 5, 0, customers, schedulerExtra...)
}

// creditLabWith also sets the back-ends' capacity and the test server's
// service time.
func creditLabWith(t *testing.T, backends, capacity int, service time.Duration, customers []lab.Customer, schedulerExtra ...string) *lab.Lab {
	t.Helper()
	return policyLab(t, "credit", backends, capacity, service, customers, schedulerExtra...)
}

// policyLab builds a lab whose listeners all use policy.
func policyLab(t *testing.T, policy string, backends, capacity int, service time.Duration, customers []lab.Customer, schedulerExtra ...string) *lab.Lab {
	t.Helper()
	return extraLab(t, "k", func(cfg *lab.Config) {
		cfg.Backends, cfg.Capacity, cfg.ServiceTime = backends, capacity, service
		cfg.FrontendConfig = filepath.Join(sharedTempDir(t), "frontend.yaml")
		y := lab.FrontendYAMLPolicy(cfg.StateDir, backends, capacity, policy, customers, schedulerExtra...)
		if err := os.WriteFile(cfg.FrontendConfig, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// slowDownload is a curl fetching a large body at a limited rate, in the
// background, so that it is in service when something happens.
type slowDownload struct {
	cmd     *exec.Cmd
	headers string
	done    chan error
}

func startSlowDownload(t *testing.T, l *lab.Lab, host string) *slowDownload {
	dir := t.TempDir()
	d := &slowDownload{headers: filepath.Join(dir, "h"), done: make(chan error, 1)}
	d.cmd = l.Command("c1", "curl", "-sS", "--max-time", "60", "--limit-rate", "1M", "-H", "Host: "+host,
		"-D", d.headers, "-o", "/dev/null", fmt.Sprintf("http://%s:8080/data/64M", lab.VIP))
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	return d
}

// backend waits for the response headers and returns X-Backend-Id.
func (d *slowDownload) backend(t *testing.T) int {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(d.headers); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.EqualFold(k, "X-Backend-Id") {
					f.Close()
					id, _ := strconv.Atoi(strings.TrimSpace(v))
					return id
				}
			}
			f.Close()
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
	t.Fatal("no response headers within 10 s")
	return 0
}

func backendByID(st frontend.Status, id uint32) frontend.BackendStatus {
	for _, b := range st.Backends {
		if b.ID == id {
			return b
		}
	}
	return frontend.BackendStatus{}
}

// TestBackendDeathAndReturn kills back-end 2's shim while downloads are in
// service on every back-end: it must be declared dead within two
// keepalive intervals, its clients must get a RST (not hang), its
// requests must be refunded, nothing may go to it afterwards, and it must
// be used again once it has registered again.
func TestBackendDeathAndReturn(t *testing.T) {
	l := creditLab(t, 3, []lab.Customer{{Name: "A", Domains: []string{"a.example"}, Reservation: 200}})
	// curl's --limit-rate paces its reads, not the kernel's: with this
	// machine's tcp_rmem (up to 32 MB) a slow download queued 14-32 MB
	// in its socket, and Linux returns queued data before the error a
	// RST left, so curl saw the reset up to half a minute after it came
	// (the socket already gone from ss). 1 MB of queue is read within a
	// second.
	if err := l.Sysctl("c1", "net.ipv4.tcp_rmem", "4096 131072 1048576"); err != nil {
		t.Fatal(err)
	}
	var downloads []*slowDownload
	onB2 := 0
	for i := 0; i < 6; i++ {
		d := startSlowDownload(t, l, "a.example")
		if d.backend(t) == 2 {
			onB2++
		}
		downloads = append(downloads, d)
	}
	if onB2 == 0 {
		t.Fatal("no download landed on back-end 2")
	}
	killed := time.Now()
	if err := l.StopProcess("backend-b2"); err != nil {
		t.Fatal(err)
	}
	var deadAfter time.Duration
	for {
		st := frontendStatus(t, l)
		if !backendByID(st, 2).Alive {
			deadAfter = time.Since(killed)
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatal("back-end 2 still alive 5 s after its shim stopped")
		}
		time.Sleep(50 * time.Millisecond) // polling the front-end's status
	}
	if deadAfter > 2*time.Second+300*time.Millisecond {
		t.Errorf("declared dead after %v, want within two keepalive intervals (2 s)", deadAfter)
	}
	t.Logf("back-end 2 declared dead %v after its shim stopped", deadAfter)

	// Its clients see a reset, quickly; the others keep downloading.
	reset := 0
	for _, d := range downloads {
		select {
		case err := <-d.done:
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 56 { // curl: failure receiving data (reset)
				reset++
			} else {
				t.Errorf("a download ended with %v, want curl exit 56 (connection reset)", err)
			}
		case <-time.After(5 * time.Second):
		}
	}
	if reset != onB2 {
		t.Errorf("%d downloads were reset, %d were on back-end 2", reset, onB2)
		ss, _ := l.Command("c1", "ss", "-tnmi").CombinedOutput()
		t.Logf("the client's sockets:\n%s", ss)
	}
	after := frontendStatus(t, l)
	var refunded uint64
	for _, c := range after.Customers {
		refunded += c.Refunded
	}
	if refunded < uint64(onB2) {
		t.Errorf("refunded %d requests, want at least the %d in service on back-end 2", refunded, onB2)
	}
	// New requests avoid the dead back-end.
	b2 := backendByID(after, 2).Dispatched
	for i := 0; i < 6; i++ {
		f := curlGet(t, l, "c1", vipURL(8080, 1<<10), "-H", "Host: a.example")
		checkBody(t, f, 1<<10, "after death")
		if f.backend == 2 {
			t.Fatal("a request went to the dead back-end")
		}
	}
	if got := backendByID(frontendStatus(t, l), 2).Dispatched; got != b2 {
		t.Errorf("dead back-end 2 was dispatched %d more requests", got-b2)
	}

	// It comes back and is used again.
	if err := l.StartProcess("backend-b2"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		f := curlGet(t, l, "c1", vipURL(8080, 1<<10), "-H", "Host: a.example")
		checkBody(t, f, 1<<10, "after return")
		if f.backend == 2 {
			return
		}
	}
	t.Fatal("back-end 2 was not used again after it re-registered")
}
