// Command qsplice-testserver is the lab's back-end web server: it serves
// deterministic bodies (GET /data/<size>) after a configurable service
// time, so experiments can check every byte and control the load, and
// with -shop the pages of the LIFO-Pri shop experiment. The
// routes and the service-time model are described in package
// tools/testserver; this command adds flags, a listener and a clean stop
// on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/testserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-testserver:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	version  bool // -version: print it, nothing else
	listen   string
	fastOpen int // -fast-open: TCP_FASTOPEN queue length of the listener, 0 off
	cfg      testserver.Config
}

const usageHead = `Usage: qsplice-testserver [flags]

The qsplice lab's back-end web server. Routes:
  GET  /data/<size>   deterministic bytes from (id, size); size like 1500, 1K, 64M.
                      ?service=40ms sets this request's service time.
  GET  / and /health  "qsplice-testserver id=N", never delayed
  POST /echo          echoes the request body (upload tests)
Every response carries X-Backend-Id: N; /data and /echo carry X-Service-Time.

With -trees M (M > 1) the site comes in M content trees of falling cost:
  GET  /tree<k>/data/<size>  tree k < M: k/M of the size (other bytes) and of
                             the service time; the plain paths are tree M.
Every response then carries X-Content-Tree: k.

With -shop (or -shop-service), the eight pages of the LIFO-Pri shop experiment
  GET / /browse /search /details /login /shipping /payment /confirm
answer a small HTML page after an exponential service time with the page's mean
(X-Service-Time says the draw); the query string is ignored. The default means
are the simulator's (tools/experiment): main=150ms,browse=200ms,search=300ms,
details=200ms,login=400ms,shipping=400ms,payment=500ms,confirm=600ms.

Flags:
`

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	var id uint
	fs := flag.NewFlagSet("qsplice-testserver", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", ":8080", "`address` to listen on, host:port")
	fs.UintVar(&id, "id", 0, "back-end `id`: seeds the /data bodies and is sent as X-Backend-Id")
	fs.DurationVar(&o.cfg.ServiceTime, "service-time", 0, "`time` /data and /echo wait before answering, modelling the application's work")
	fs.DurationVar(&o.cfg.ServiceJitter, "service-jitter", 0, "spread the service time uniformly over service-time ± this `time` (never below 0)")
	fs.IntVar(&o.cfg.Trees, "trees", 0, "serve the site in `M` content trees: /tree<k>/data/<size> for k < M (k/M of the size and service time), the plain paths as tree M; answers carry X-Content-Tree")
	shop := fs.Bool("shop", false, "serve the shop experiment's eight pages with the default mean service times")
	shopService := fs.String("shop-service", "", "serve the shop pages with these mean service times, `page=time,...` (pages not listed keep the default); implies -shop")
	fs.IntVar(&o.fastOpen, "fast-open", 0, "accept TCP Fast Open (RFC 7413) with a queue of `N` pending Fast Open connections (TCP_FASTOPEN on the listening socket): "+
		"a client holding this host's cookie sends its request in the SYN, and the request is read before the handshake completes, one round trip earlier; "+
		"the kernel also needs net.ipv4.tcp_fastopen with its server bit 0x2 set (2 or 3) in this network namespace, or it gives no cookies and reads no SYN data; 0: off")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, nil
	}
	if *shop || *shopService != "" {
		means, err := testserver.ParseShopService(*shopService)
		if err != nil {
			return o, err
		}
		o.cfg.Shop = &testserver.Shop{ServiceMean: means}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case id > 1<<32-1:
		return o, fmt.Errorf("-id %d does not fit 32 bits", id)
	case o.cfg.Trees < 0 || o.cfg.Trees > 255:
		return o, fmt.Errorf("-trees %d is out of range 0..255", o.cfg.Trees)
	case o.cfg.ServiceTime < 0 || o.cfg.ServiceJitter < 0:
		return o, errors.New("-service-time and -service-jitter must not be negative")
	case o.fastOpen < 0 || o.fastOpen > math.MaxInt32:
		return o, fmt.Errorf("-fast-open %d is out of range 0..%d", o.fastOpen, math.MaxInt32)
	}
	o.cfg.ID = uint32(id)
	return o, nil
}

// run serves until ctx ends, then stops accepting and lets requests in
// progress finish for a few seconds.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Println(version.Line("qsplice-testserver"))
		return nil
	}
	ln, err := listen(context.Background(), o.listen, o.fastOpen)
	if err != nil {
		return err
	}
	logger := log.New(stderr, "qsplice-testserver: ", log.LstdFlags)
	srv := &http.Server{
		Handler:           testserver.NewHandler(o.cfg),
		ReadHeaderTimeout: 30 * time.Second,
		// No IdleTimeout: keep-alive connections stay open as long as the
		// client wants, as the splice's long-lived connections need.
		ErrorLog: logger,
	}
	logger.Printf("id=%d listening on %s, service time %v ± %v", o.cfg.ID, ln.Addr(), o.cfg.ServiceTime, o.cfg.ServiceJitter)
	if o.fastOpen > 0 {
		logger.Printf("TCP Fast Open: queue %d (needs net.ipv4.tcp_fastopen with bit 0x2 in this namespace)", o.fastOpen)
	}
	if o.cfg.Shop != nil {
		logger.Printf("shop pages, mean service times %s", testserver.FormatShopService(o.cfg.Shop.ServiceMean))
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen opens the TCP listener; fastOpen > 0 sets TCP_FASTOPEN on its
// socket before bind and listen (what nginx's "listen ... fastopen=N"
// sets too), so that a SYN with a valid cookie and a request is taken
// from the first connection on.
func listen(ctx context.Context, addr string, fastOpen int) (net.Listener, error) {
	lc := net.ListenConfig{}
	if fastOpen > 0 {
		lc.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, fastOpen)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("setsockopt TCP_FASTOPEN %d: %w", fastOpen, serr)
			}
			return nil
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}
