package e2e

import (
	"fmt"
	"testing"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestLifoPriListener runs a lab whose listeners use the LIFO-Pri policy:
// requests are classified by path into the shop's classes, served, and
// counted per class; the policy reports its measured utilization.
func TestLifoPriListener(t *testing.T) {
	l := policyLab(t, "lifo-pri", 2, 5, 0, nil)
	paths := map[string]string{"/data/1K": "main", "/data/1K?x=/login": "main"}
	for p := range paths {
		f := curlGet(t, l, "c1", fmt.Sprintf("http://%s:8080%s", lab.VIP, p))
		checkBody(t, f, 1<<10, p)
	}
	for i := 0; i < 3; i++ {
		// Class paths the test server does not serve still go through the
		// policy (and come back 404 from the back-end).
		for _, p := range []string{"/login", "/browse", "/confirm"} {
			if f := curlGet(t, l, "c1", fmt.Sprintf("http://%s:8080%s", lab.VIP, p)); f.status != 404 {
				t.Fatalf("%s: status %d, want the back-end's 404", p, f.status)
			}
		}
	}
	st := frontendStatus(t, l)
	if st.Lifo == nil {
		t.Fatal("no lifo section in /status")
	}
	got := map[string]uint64{}
	for _, c := range st.Customers {
		got[c.Name] = c.Admitted
	}
	for class, want := range map[string]uint64{"main": 2, "login": 3, "browse": 3, "confirm": 3} {
		if got[class] != want {
			t.Errorf("class %s admitted %d requests, want %d (all: %v)", class, got[class], want, got)
		}
	}
}
