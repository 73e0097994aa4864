package lab

import (
	"testing"

	"github.com/qsplice/qsplice/frontend/conf"
)

// TestFrontendYAMLParses: the file the lab writes is one the front-end
// accepts, with the customers and classification asked for.
func TestFrontendYAMLParses(t *testing.T) {
	y := FrontendYAML("/run/qsplice/x", 5, 5, []Customer{
		{Name: "A", Domains: []string{"a.example"}, Reservation: 500},
		{Name: "B", Domains: []string{"b.example", "*.b.example"}, Reservation: 100, Cap: 300, Weight: 2},
	}, "  queue_timeout: 500ms")
	f, err := conf.Parse("lab.yaml", []byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if got := f.Classify("x.b.example"); got != "B" {
		t.Errorf("Classify(x.b.example) = %q", got)
	}
	if got := f.Classify("nobody.example"); got != "other" {
		t.Errorf("Classify(nobody.example) = %q", got)
	}
	if f.Scheduler.QueueTimeout.String() != "500ms" || len(f.Listeners) != 2 {
		t.Errorf("scheduler %+v listeners %+v", f.Scheduler, f.Listeners)
	}
}
