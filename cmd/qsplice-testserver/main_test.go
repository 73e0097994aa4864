package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/tools/session"
	"github.com/qsplice/qsplice/tools/testserver"
)

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-listen", "127.0.0.1:9000", "-id", "4", "-service-time", "20ms", "-service-jitter", "5ms"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if o.listen != "127.0.0.1:9000" || o.cfg.ID != 4 || o.cfg.ServiceTime != 20*time.Millisecond || o.cfg.ServiceJitter != 5*time.Millisecond {
		t.Fatalf("parsed %+v", o)
	}
	if o, err = parseFlags(nil, new(bytes.Buffer)); err != nil || o.listen != ":8080" || o.cfg.ID != 0 || o.cfg.ServiceTime != 0 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	if o.cfg.Shop != nil {
		t.Fatal("shop pages without -shop")
	}
	if o.fastOpen != 0 {
		t.Fatalf("TCP Fast Open on by default: -fast-open %d", o.fastOpen)
	}
	if o, err = parseFlags([]string{"-fast-open", "256"}, new(bytes.Buffer)); err != nil || o.fastOpen != 256 {
		t.Fatalf("-fast-open 256: %d, %v", o.fastOpen, err)
	}
	o, err = parseFlags([]string{"-shop"}, new(bytes.Buffer))
	if err != nil || o.cfg.Shop == nil || o.cfg.Shop.ServiceMean != testserver.DefaultShopService() {
		t.Fatalf("-shop: %+v, %v", o.cfg.Shop, err)
	}
	o, err = parseFlags([]string{"-shop-service", "confirm=2s"}, new(bytes.Buffer))
	if err != nil || o.cfg.Shop == nil || o.cfg.Shop.ServiceMean[session.Confirm] != 2*time.Second ||
		o.cfg.Shop.ServiceMean[session.Main] != 150*time.Millisecond {
		t.Fatalf("-shop-service: %+v, %v", o.cfg.Shop, err)
	}
	for _, bad := range [][]string{
		{"-shop-service", "cart=1s"},
		{"-id", "4294967296"}, {"-id", "-1"}, {"-service-time", "-1ms"}, {"-service-jitter", "x"}, {"extra"},
		{"-fast-open", "-1"}, {"-fast-open", "2147483648"},
	} {
		if _, err := parseFlags(bad, new(bytes.Buffer)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-listen", "-id", "-service-time", "-service-jitter", "-shop", "-shop-service", "/data/<size>", "/echo", "/confirm",
		"-fast-open", "TCP_FASTOPEN", "net.ipv4.tcp_fastopen", "0x2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %s:\n%s", want, out.String())
		}
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, []string{"-listen", "127.0.0.1:0"}, new(bytes.Buffer)); err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	if err := run(context.Background(), []string{"-listen", "256.0.0.1:1"}, new(bytes.Buffer)); err == nil {
		t.Fatal("run on an impossible address succeeded")
	}
}

// The listener of -fast-open N has TCP_FASTOPEN N (the kernel reports
// the queue length back; it caps it at net.core.somaxconn, 4096 by
// default), and without the flag none.
func TestFastOpenListener(t *testing.T) {
	for _, queue := range []int{0, 1, 256} {
		ln, err := listen(context.Background(), "127.0.0.1:0", queue)
		if err != nil {
			t.Fatalf("listen with -fast-open %d: %v", queue, err)
		}
		got, err := fastOpenQueue(ln)
		ln.Close()
		if err != nil {
			t.Fatalf("-fast-open %d: getsockopt: %v", queue, err)
		}
		if got != queue {
			t.Errorf("-fast-open %d: TCP_FASTOPEN on the listener is %d", queue, got)
		}
	}
}

// fastOpenQueue reads TCP_FASTOPEN from a listener's socket.
func fastOpenQueue(ln net.Listener) (int, error) {
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN)
	}); err != nil {
		return 0, err
	}
	return v, gerr
}
