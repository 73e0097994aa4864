package lab

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestEchoesOutliveAResendWhileTheShimSleeps (issue 7, twenty-seventh
// session): with the kernel's echoes, a client can have a response from
// the kernel and send its next request while the shim sleeps; if the
// server meanwhile sends that response's reply again (its ACK waits in
// the sleeping shim), the shim wakes to the request on the wire and the
// resent reply in the TAP, in that order. It used to take the resent
// reply for the start of the next response, which then crossed the shim
// as echoes, its head never read and its middle never handed to the
// kernel (splice/shim_translate.go, resent). Here a real shim is stopped
// (SIGSTOP) between the two, and woken only once the back-end's kernel
// has counted a retransmission: a keep-alive 8 MiB response that follows
// a 1 KiB one must arrive exactly, and most of it through the kernel's
// middle.
func TestEchoesOutliveAResendWhileTheShimSleeps(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	cfg.Backends, cfg.Nginx = 1, false
	cfg.BackendArgs = []string{"-reply-fastpath", "echo"}
	l := upLab(t, cfg)
	p, err := l.spec(backendName(1))
	if err != nil {
		t.Fatal(err)
	}
	shim := l.status(p)
	if !shim.alive {
		t.Fatalf("shim: %s", shim.detail)
	}
	status := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), BackendAdminPort)
	admin := l.HTTPClient("c1")
	defer admin.CloseIdleConnections()
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()

	// The first request waits 300 ms at the server: time to stop the
	// shim once it is in service.
	first := make(chan error, 1)
	go func() {
		_, err := getExact(client, fmt.Sprintf("http://%s:8080/data/1K?service=300ms", VIP), 1<<10)
		first <- err
	}()
	waitFor(t, "the first request in service at the shim", func() bool {
		var s struct{ Active int }
		_, err := GetJSON(context.Background(), admin, status, &s)
		return err == nil && s.Active == 1
	})
	retrans := kernelRetransmissions(t, l)
	if err := syscall.Kill(shim.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	wake := func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(shim.pid, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer wake()
	// The response reaches the client from the kernel, the shim asleep.
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("the first response, with the shim stopped: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first response did not reach the client with the shim stopped: the kernel echoed nothing")
	}
	second := make(chan error, 1)
	go func() {
		_, err := getExact(client, fmt.Sprintf("http://%s:8080/data/8M", VIP), 8<<20)
		second <- err
	}()
	waitFor(t, "the back-end's kernel to send a reply again", func() bool {
		return kernelRetransmissions(t, l) > retrans
	})
	wake()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	var s struct {
		FastPath struct{ Bytes, Echoed uint64 } `json:"fast_path"`
		Shim     struct{ Echoes, RequestsAheadOfEchoes uint64 }
	}
	if _, err := GetJSON(context.Background(), admin, status, &s); err != nil {
		t.Fatal(err)
	}
	t.Logf("the kernel's middle carried %d bytes, echoed %d; shim %+v; the back-end's kernel resent %d segments",
		s.FastPath.Bytes, s.FastPath.Echoed, s.Shim, kernelRetransmissions(t, l)-retrans)
	if s.FastPath.Bytes < 4<<20 {
		t.Errorf("the kernel's middle carried %d bytes of the 8 MiB response (%d echoes, %d requests ahead of echoes), want most of it",
			s.FastPath.Bytes, s.Shim.Echoes, s.Shim.RequestsAheadOfEchoes)
	}
}

// kernelRetransmissions is the TCP segments the back-end's kernel has
// sent again.
func kernelRetransmissions(t *testing.T, l *Lab) int64 {
	t.Helper()
	return nstatCounter(t, l, backendHost(1), "TcpRetransSegs")
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("no %s after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
