package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

// BenchmarkLabBulkThroughput measures a 256 MB download through the VIP
// (front-end + back-end shim, response straight from the shim to the
// client) and the same download from the same server program running on a
// kernel interface with no shim (the front-end host's own address), in
// the same lab, in the same run. It reports both rates and their ratio.
// Set QSPLICE_LAB_BENCH=1 (make bench does).
func BenchmarkLabBulkThroughput(b *testing.B) {
	if os.Getenv("QSPLICE_LAB_BENCH") == "" {
		b.Skip("set QSPLICE_LAB_BENCH=1 to run the lab throughput benchmark")
	}
	l := needLab(b)
	const size = "256M"
	// A second test server, on the front-end host's kernel address.
	srv := l.Command("fe", filepath.Join(l.Config().BinDir, "qsplice-testserver"), "-listen", lab.FrontendAddr+":8081", "-id", "9")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitListening(b, l, lab.FrontendAddr+":8081")
	rate := func(url string) float64 {
		var rates []float64
		for i := 0; i < 3; i++ {
			out, err := l.Command("c1", "curl", "-sS", "--max-time", "120", "-o", "/dev/null", "-w", "%{speed_download}", url).Output()
			if err != nil {
				b.Fatalf("curl %s: %v", url, err)
			}
			r, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				b.Fatalf("curl speed %q: %v", out, err)
			}
			rates = append(rates, r*8/1e9)
		}
		sort.Float64s(rates)
		return rates[1]
	}
	for i := 0; i < b.N; i++ {
		direct := rate(fmt.Sprintf("http://%s:8081/data/%s", lab.FrontendAddr, size))
		spliced := rate(fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, size))
		b.ReportMetric(direct, "Gbit/s-direct")
		b.ReportMetric(spliced, "Gbit/s-spliced")
		b.ReportMetric(spliced/direct, "ratio")
	}
}

func waitListening(tb testing.TB, l *lab.Lab, addr string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := l.Dial(ctx, "c1", "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s never listened: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a process we started
	}
}
