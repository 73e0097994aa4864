package lab

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// TestVMFrontend boots the front-end as a QEMU guest on the lab's bridge
// (`-vm fe`; KVM if /dev/kvm opens, TCG otherwise) with a namespace
// back-end, downloads 0 B, 1 MB and 64 MB through the VIP, sha256-exact,
// checks on the guest's switch port that no response byte crossed the
// front-end, that status names the guest and its accelerator, and that
// Down leaves no namespace, TAP, QEMU or file behind.
func TestVMFrontend(t *testing.T) {
	requireRoot(t)
	if err := CheckVMSupport(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the VM front-end (.ci/run installs what it needs): %v", err)
		}
		t.Skipf("cannot run a VM front-end here: %v", err)
	}
	cfg := daemonConfig(t)
	cfg.Backends, cfg.Nginx = 1, false
	cfg.VMFrontend = true
	cfg.VMBinDir = staticBins(t)
	cfg.BackendArgs = []string{"-linger", "1s"}
	start := time.Now()
	t.Cleanup(func() { downAndCheck(t, cfg.Name, cfg.StateDir) })
	l, err := Up(context.Background(), cfg)
	if err != nil {
		console, _ := os.ReadFile(filepath.Join(cfg.StateDir, logDir, "vm-fe.console"))
		t.Fatalf("Up: %v\nfront-end guest console:\n%s", err, console)
	}
	t.Logf("lab with a VM front-end (%s) up in %v", VMAccel(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { // before upLab's Down, which removes the logs
		if t.Failed() {
			console, _ := os.ReadFile(l.VMFrontendConsolePath())
			t.Logf("front-end guest console:\n%s", console)
		}
	})
	var qemuPID int
	for _, p := range l.Processes() {
		if p.Name == frontendName && p.Alive && p.Host == "sw" {
			qemuPID = p.PID
		}
	}
	if alive, _ := pidRuns(qemuPID, qemuProgram); qemuPID == 0 || !alive {
		t.Fatalf("the front-end is not a live QEMU in the switch: %+v", l.Processes())
	}
	var st bytes.Buffer
	if err := l.WriteStatus(t.Context(), &st); err != nil {
		t.Fatal(err)
	}
	if want := "VMs: fe (QEMU with " + strings.ToUpper(VMAccel()); !strings.Contains(st.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, st.String())
	}

	capFile := filepath.Join(t.TempDir(), "fe.pcap")
	stopCapture, err := l.StartCapture("fe", capFile)
	if err != nil {
		t.Fatal(err)
	}
	client := l.HTTPClient("c1")
	for _, size := range []int64{0, 1 << 20, 64 << 20} {
		began := time.Now()
		fetchFromVM(t, client, size) // back-end 1's content, checked
		t.Logf("%s through the VIP of the guest front-end in %v", content.FormatSize(size), time.Since(began).Round(time.Millisecond))
	}
	client.CloseIdleConnections()
	if _, err := stopCapture(); err != nil {
		t.Fatal(err)
	}
	payload, fromClient := responsePayloadToClient(t, capFile, l.ClientAddr(1).String())
	if fromClient == 0 {
		t.Fatalf("the capture on fe's port saw no frame from the client: it proves nothing")
	}
	if payload != 0 {
		t.Errorf("%d response payload bytes to the client crossed the front-end's link", payload)
	}
	if err := l.Down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	assertGone(t, cfg.Name, cfg.StateDir)
	if alive, _ := pidRuns(qemuPID, qemuProgram); alive {
		t.Errorf("QEMU (pid %d) survives Down", qemuPID)
	}
}
