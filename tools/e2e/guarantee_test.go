package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/demo"
)

// TestGuaranteedRatesUnderFlood runs the published scenario live (at the
// demo's default scale, which fits a 2-core host) with customer B
// flooding at 10x its reservation while the others offer 1.5x. The
// credit scheduler keeps A, C and D at their reservations; a FIFO front-end
// would serve everyone in proportion to what they offer and leave each
// of them near half. The bound is looser than the simulator's 97%
// because the machine is shared; tools/sim holds the exact figure.
func TestGuaranteedRatesUnderFlood(t *testing.T) {
	base := needLab(t)
	var suffix [3]byte
	rand.Read(suffix[:])
	g := demo.GuaranteeConfig{Scale: 0.3, Offer: 1.5, Flood: "B", Duration: 8 * time.Second, Warmup: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := demo.RunGuarantee(ctx, "g"+hex.EncodeToString(suffix[:]), base.Config().BinDir, g, false, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Load.Streams {
		if s.Name == "B" && (s.Completed.ServiceUnavailable == 0 || s.RetryAfter.ServiceUnavailable != s.Completed.ServiceUnavailable) {
			t.Errorf("flooding B got %d 503 answers, %d with Retry-After; want some, all with it",
				s.Completed.ServiceUnavailable, s.RetryAfter.ServiceUnavailable)
		}
	}
	for _, r := range res.Rows {
		t.Logf("%s: reservation %.0f/s, offered %.0f/s, served %.1f/s (%.1f%%), p99 %v",
			r.Name, r.Reservation, r.Offered, r.Served, 100*r.Attainment, r.P99)
		if r.Name != "B" && r.Attainment < 0.9 {
			t.Errorf("%s got %.1f%% of its reservation while B flooded", r.Name, 100*r.Attainment)
		}
	}
}

// TestSlowCustomerIsChargedDouble runs the published scenario live (same
// scale) with customer C's requests taking twice the typical service
// time: the back-ends report it, the front-end charges C two credits a
// request, so C is served about half its reservation while A, B and D
// keep theirs.
func TestSlowCustomerIsChargedDouble(t *testing.T) {
	base := needLab(t)
	var suffix [3]byte
	rand.Read(suffix[:])
	customers := append([]demo.Customer(nil), demo.Published...)
	customers[2].Service = 40 * time.Millisecond // before scaling, as qsplice-demo -slow-c
	g := demo.GuaranteeConfig{Customers: customers, Scale: 0.3, Offer: 2, Duration: 8 * time.Second, Warmup: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := demo.RunGuarantee(ctx, "s"+hex.EncodeToString(suffix[:]), base.Config().BinDir, g, false, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	perRequest := map[string]float64{}
	for _, c := range res.Frontend.Customers {
		if c.Served > 0 {
			perRequest[c.Name] = c.Charged / float64(c.Served)
		}
	}
	for _, r := range res.Rows {
		t.Logf("%s: reservation %.0f/s, served %.1f/s (%.1f%%), charged %.2f credits per request served",
			r.Name, r.Reservation, r.Served, 100*r.Attainment, perRequest[r.Name])
		charge := perRequest[r.Name]
		switch {
		case r.Name == "C" && (r.Attainment < 0.35 || r.Attainment > 0.7):
			t.Errorf("C (requests twice as long) got %.1f%% of its reservation, want about half", 100*r.Attainment)
		case r.Name == "C" && (charge < 1.6*perRequest["A"] || charge > 2.5*perRequest["A"]):
			t.Errorf("C was charged %.2f credits a request against A's %.2f, want about twice", charge, perRequest["A"])
		case r.Name != "C" && r.Attainment < 0.9:
			t.Errorf("%s got %.1f%% of its reservation while C's requests were slow", r.Name, 100*r.Attainment)
		}
	}
}
