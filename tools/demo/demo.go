// Package demo is what `make demo` runs: it builds a lab, drives load
// through the VIP with real clients (wrk and curl in the client
// namespace), prints what each back-end served and what the front-end
// carried, and tears the lab down, also when interrupted.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
)

// Config says what to run.
type Config struct {
	BinDir       string
	Duration     time.Duration // measured load time (30 s)
	Offer        float64       // each customer offers this many times its reservation (2)
	SlowC        bool          // C's requests take twice the typical service time
	Scale        float64       // see GuaranteeConfig.Scale
	FrontendArgs []string
	HandoffAhead *int   // backends.handoff_ahead; nil: the default
	Flood        string // a customer offering 10x its reservation
	KeepLab      bool   // leave the lab up for inspection
	Name         string
	// Progress gets a [k/N] line with the time left as each stage starts
	// (the command's stderr); nil: none (-quiet).
	Progress io.Writer
}

// Run performs the demo: the published guaranteed-rates scenario, live,
// with byte-exact downloads first, writing the results and tables to w
// and the progress lines to cfg.Progress.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Name == "" {
		var b [2]byte
		rand.Read(b[:])
		cfg.Name = "demo" + hex.EncodeToString(b[:])
	}
	g := GuaranteeConfig{Duration: cfg.Duration, Offer: cfg.Offer, Scale: cfg.Scale, FrontendArgs: cfg.FrontendArgs, Flood: cfg.Flood,
		HandoffAhead: cfg.HandoffAhead, Progress: cfg.Progress, BeforeLabel: "byte-exact downloads through the VIP"}
	if cfg.SlowC {
		g.Customers = append([]Customer(nil), Published...)
		g.Customers[2].Service = 40 * time.Millisecond
	}
	downloads := func(l *lab.Lab) error {
		fmt.Fprintf(w, "== byte-exact downloads through the VIP %s\n", lab.VIP)
		for _, size := range []int64{1 << 10, 1 << 20, 16 << 20} {
			id, ok, err := fetchAndCheck(ctx, l, fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, content.FormatSize(size)), size)
			if err != nil {
				return err
			}
			verdict := "sha256 OK"
			if !ok {
				verdict = "sha256 MISMATCH"
			}
			fmt.Fprintf(w, "   %-6s from back-end %d: %s\n", content.FormatSize(size), id, verdict)
		}
		return nil
	}
	res, err := RunGuarantee(ctx, cfg.Name, cfg.BinDir, g, cfg.KeepLab, w, downloads)
	if err != nil {
		return err
	}
	PrintGuarantee(w, res)
	printTable(w, res.Frontend)
	return nil
}

func fetchAndCheck(ctx context.Context, l *lab.Lab, url string, size int64) (int, bool, error) {
	c := l.HTTPClient("c1")
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var id int
	fmt.Sscan(resp.Header.Get("X-Backend-Id"), &id)
	sum := content.SHA256(uint32(id), size)
	h := newHasher()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return id, false, err
	}
	return id, n == size && h.sum() == sum, nil
}

func status(ctx context.Context, l *lab.Lab) (frontend.Status, error) {
	var st frontend.Status
	_, err := lab.GetJSON(ctx, l.HTTPClient("c1"), lab.AdminURL+"/status", &st)
	return st, err
}

func printTable(w io.Writer, st frontend.Status) {
	fmt.Fprintf(w, "\n== per back-end (reported by the shims in Feedback messages)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "back-end\talive\tconnections\trequests served\tresponse bytes\tmean service ms\t")
	var served, bytes uint64
	for _, b := range st.Backends {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%d\t%.2f\t\n", b.ID, b.Alive, b.Dispatched, b.Served, b.ResponseBytes, b.MeanServiceMs)
		served += b.Served
		bytes += b.ResponseBytes
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t%d\t\t\n", served, bytes)
	tw.Flush()
	e := st.Engine
	fmt.Fprintf(w, "\n== what the front-end carried\n")
	fmt.Fprintf(w, "   client connections accepted %d, handoffs %d (failed %d)\n", e.Accepted, e.HandoffsDone, e.HandoffsFailed)
	fmt.Fprintf(w, "   request bytes it handed over on C2 %d, client bytes forwarded after splicing %d\n", e.HandedOffBytes, e.ForwardedBytes)
	fmt.Fprintf(w, "   frames in %d, out %d; response payload bytes through the front-end: %d\n", e.RxFrames, e.TxFrames, e.ReplyPayloadBytes)
	if bytes > 0 {
		fmt.Fprintf(w, "   the back-ends sent %d response bytes straight to the client; the front-end carried %.4f%% of all bytes\n",
			bytes, 100*float64(e.ForwardedBytes+e.HandedOffBytes)/float64(bytes+e.ForwardedBytes+e.HandedOffBytes))
	}
}

// DefaultBinDir is the directory of the running executable ("." if
// unknown).
func DefaultBinDir() string {
	if d := lab.ExecutableDir(); d != "" {
		return d
	}
	return "."
}
