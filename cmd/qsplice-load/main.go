// Command qsplice-load is the lab's open-loop HTTP load generator: it
// offers one request stream per customer to the front-end's VIP from the
// lab's client namespace (ip netns exec qs-NAME-c1 qsplice-load ...) and
// reports, per customer and in total, what was served, refused and how
// long it took. The load model and the accounting are described in
// package tools/loadgen; this command adds flags, a progress line, a
// summary table and the JSON file experiments read.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		// The first signal ends the run gracefully (results are still
		// written); restoring the default lets a second one kill at once.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-load:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	version  bool // -version: print it, nothing else
	cfg      loadgen.Config
	sessions *loadgen.SessionConfig // session mode; nil: streams
	wsesslog string
	drain    time.Duration
	jsonPath string // "" none, "-" stdout
	progress bool
}

// streamFlags collects repeated -stream flags.
type streamFlags struct{ streams *[]loadgen.Stream }

func (f streamFlags) String() string { return "" }

func (f streamFlags) Set(s string) error {
	st, err := loadgen.ParseStream(s)
	if err != nil {
		return err
	}
	*f.streams = append(*f.streams, st)
	return nil
}

const usageHead = `Usage: qsplice-load -target URL -stream SPEC [-stream SPEC ...] [flags]
       qsplice-load -target URL -sessions SESSIONS [-wsesslog FILE] [flags]

Offers open-loop HTTP load to the VIP, one stream per customer (Host header).
A closed-loop tool such as wrk sends a request only when an earlier one has
finished, so a stalled server quietly lowers the load it is offered and the
requests that would have arrived meanwhile are never timed, a flaw known as
coordinated omission. This one is open-loop: each request leaves at an intended
time fixed in advance (Poisson or constant gaps) whatever became of the others,
and its latency runs from that intended time, so the waits a stall causes count.

SPEC is comma-separated key=value pairs:
  name=A         label in results (required)
  rate=1000      intended requests/s (required)
  host=a.example Host header (default: the target's host)
  path=/data/1K  path and query, e.g. /data/1K?service=40ms (default /; no commas)
  arrival=poisson|constant  (default poisson)
  cookie=tier=gold  Cookie header of every request (no commas; join with ;)
  sessions=100   carry the session cookie (-session-cookie) of one of this many
                 sessions in turn, <name>-<i>: the first request of each is a
                 new session, the later ones a session the front-end has seen
  session-requests=10  with sessions=N: a session ends after this many
                 requests and a new one takes its slot (1 in 10 starts one)

-steps 0.5@0,2@10s,0.5@40s multiplies every stream's rate by 0.5 from the
start, by 2 from 10 s, by 0.5 again from 40 s (offsets include the warm-up):
a step load, with Poisson arrivals an inhomogeneous Poisson process.

Results count the requests whose intended time falls after the warm-up: offered,
sent, not sent (in-flight bound reached), answers by status (2xx, 429, 503,
other; Retry-After on 429/503), failures (timeout, connect refused, reset,
other), 2xx/s, latency percentiles. A table goes to stdout (stderr with
-json -); a progress line goes to stderr once a second.

Session mode (-sessions) models shoppers instead of streams: sessions arrive as
a Poisson process, each walks the shop's pages (/, /browse, /search, /details,
/login, /shipping, /payment, /confirm) as the Markov model of tools/session
says, thinks between pages, gives up on a page after its patience (closing the
connection), then retries or leaves. With -wsesslog FILE it replays httperf
--wsesslog sessions instead, in turn, with the same patience and retries.
SESSIONS is comma-separated key=value pairs:
  rate=5         new sessions per second (required)
  think=7s       mean think time (exponential; the default for log lines without think=)
  timeout=8s     mean patience per request (exponential)
  retries=2      retries of a failed page before leaving
  abandon=0.5    probability of leaving at once after a failed page
  count=0        start at most this many sessions, then end when they are over
  refused=retry  retry: a 503 is a failed page like a timeout; leave: the session ends
Results cover sessions arriving after the warm-up: per page class requested,
completed (2xx in time), timed out, refused (503), other, errors, and not
generated (pages a session that left would still have asked for: its walk is
continued from the page it left on, without sending, until exit); per session
completed, abandoned, unfinished (cut by the end of the run), not started.
With -drain D the measured sessions are followed for up to D past the window,
new sessions still arriving, so that few are cut unfinished.

Flags:
`

func parseFlags(args []string, output io.Writer) (options, error) {
	o := options{progress: true}
	fs := flag.NewFlagSet("qsplice-load", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.cfg.Target, "target", "", "base `URL` of the VIP, e.g. http://198.18.0.100:8080 (required)")
	fs.Var(streamFlags{&o.cfg.Streams}, "stream", "one customer's stream, `SPEC` as above; repeat for more customers")
	fs.DurationVar(&o.cfg.Duration, "duration", 30*time.Second, "measured `time`, after the warm-up")
	fs.DurationVar(&o.cfg.Warmup, "warmup", 2*time.Second, "`time` of load sent first and left out of the results")
	fs.DurationVar(&o.cfg.Timeout, "timeout", loadgen.DefaultTimeout, "per-request `time` limit, from when the request starts")
	fs.IntVar(&o.cfg.MaxInFlight, "max-inflight", loadgen.DefaultMaxInFlight, "safety bound on outstanding requests; requests due beyond it are counted as not sent")
	fs.IntVar(&o.cfg.ConnsPerStream, "conns-per-stream", 0, "keep-alive connection pool size per stream; 0 opens a new connection per request")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the Poisson schedules (same seed, same intended times)")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to `FILE` (- for stdout)")
	fs.BoolVar(&o.progress, "progress", true, "print a progress line on stderr once a second")
	sessions := fs.String("sessions", "", "session mode: `SESSIONS` as above")
	fs.StringVar(&o.wsesslog, "wsesslog", "", "session mode: replay the httperf --wsesslog `FILE` (needs -sessions for the rate)")
	host := fs.String("host", "", "session mode: Host header (default: the target's host)")
	maxSessions := fs.Int("max-sessions", loadgen.DefaultMaxSessions, "session mode: most sessions alive at once; arrivals beyond are not started")
	fs.DurationVar(&o.drain, "drain", 0, "session mode: follow the measured sessions up to this `time` past the window until they end, with arrivals going on")
	sources := fs.String("sources", "", "spread the connections over these local `addresses` in turn: IPv4 addresses and prefixes, comma-separated (they must be configured on this host)")
	steps := fs.String("steps", "", "step load: `FACTOR@TIME,...` multiplying every stream's rate from each offset on, e.g. 0.5@0,2@10s,0.5@40s")
	fs.StringVar(&o.cfg.SessionCookie, "session-cookie", loadgen.DefaultSessionCookie, "`name` of the session cookie of streams with sessions=N")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *sources != "" {
		var err error
		if o.cfg.Sources, err = loadgen.ParseSources(*sources); err != nil {
			return o, fmt.Errorf("-sources: %v", err)
		}
	}
	if *steps != "" {
		var err error
		if o.cfg.Steps, err = loadgen.ParseSteps(*steps); err != nil {
			return o, fmt.Errorf("-steps: %v", err)
		}
	}
	// Checked here, before -json's file is created, rather than by
	// loadgen once it is.
	switch {
	case o.cfg.Duration <= 0:
		return o, errors.New("-duration must be positive")
	case o.cfg.Warmup < 0:
		return o, errors.New("-warmup must not be negative")
	case o.cfg.ConnsPerStream < 0:
		return o, errors.New("-conns-per-stream must not be negative")
	}
	if *sessions != "" || o.wsesslog != "" {
		return o, o.sessionMode(*sessions, *host, *maxSessions)
	}
	switch {
	case o.cfg.Target == "":
		return o, errors.New("-target is required")
	case len(o.cfg.Streams) == 0:
		return o, errors.New("at least one -stream is required")
	case o.cfg.MaxInFlight <= 0:
		return o, errors.New("-max-inflight must be positive")
	case o.cfg.Timeout <= 0:
		return o, errors.New("-timeout must be positive")
	}
	return o, nil
}

// run parses the flags, offers the load until the duration is over or ctx
// ends, and writes the results.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, version.Line("qsplice-load"))
		return nil
	}
	table := stdout
	var jsonOut io.Writer
	closeJSON := func() error { return nil }
	switch o.jsonPath {
	case "":
	case "-":
		jsonOut, table = stdout, stderr
	default:
		// Open the file before the run, so a bad path does not cost one.
		f, err := os.Create(o.jsonPath)
		if err != nil {
			return err
		}
		defer f.Close() // on early returns; the error that matters is below
		jsonOut, closeJSON = f, f.Close
	}
	var progress io.Writer
	if o.progress {
		progress = stderr
	}
	if o.sessions != nil {
		res, err := loadgen.RunSessions(ctx, *o.sessions)
		if err != nil {
			return err
		}
		writeSessionTable(table, res)
		return writeJSON(jsonOut, res, closeJSON)
	}
	res, err := loadgen.Run(ctx, o.cfg, progress)
	if err != nil {
		return err
	}
	writeTable(table, res)
	return writeJSON(jsonOut, res, closeJSON)
}

// writeJSON encodes res to w, if any, and closes the file.
func writeJSON(w io.Writer, res any, closeJSON func() error) error {
	if w != nil {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return closeJSON()
}

// writeTable prints one line per stream and the total.
func writeTable(w io.Writer, res *loadgen.Result) {
	if res.Interrupted {
		fmt.Fprintf(w, "interrupted: %.1fs of %.1fs measured\n", res.MeasuredS, res.DurationS)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join([]string{"stream", "rate", "offered", "not-sent",
		"2xx", "429", "503", "other", "timeout", "refused", "reset", "err", "ok/s",
		"p50ms", "p90ms", "p99ms", "p99.9ms", "maxms", ""}, "\t"))
	for _, r := range append(res.Streams, res.Total) {
		l := r.Latency
		fmt.Fprintf(tw, "%s\t%g\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			r.Name, r.Rate, r.Offered, r.NotSent,
			r.Completed.OK, r.Completed.TooManyRequests, r.Completed.ServiceUnavailable, r.Completed.Other,
			r.Errors.Timeout, r.Errors.ConnectRefused, r.Errors.Reset, r.Errors.Other,
			r.ThroughputOK, l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs)
	}
	tw.Flush()
	t := res.Total
	fmt.Fprintf(w, "latency of 2xx answers from intended send time; send lag p99 %.2f ms, max %.2f ms\n",
		t.SendLag.P99Ms, t.SendLag.MaxMs)
	for _, r := range append(res.Streams, res.Total) {
		if len(r.Trees) > 0 {
			fmt.Fprintf(w, "%s: 2xx per content tree 1..%d: %v\n", r.Name, len(r.Trees)-1, r.Trees[1:])
		}
	}
}
