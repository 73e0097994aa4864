package lab

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// userYAML is a front-end configuration as a researcher writes it for a
// real deployment: its own wiring, two customers on the credit policy.
const userYAML = `# my study
link: {interface: ens3, type: afpacket}
handoff: 10.0.0.9
control:
  listen: 10.0.0.2:7400
  key_file: /etc/qsplice/control.key
scheduler:
  default_customer: gold
listeners:
  - {vip: 198.18.0.100, port: 8080, policy: credit}
customers:
  - name: gold
    domains: [gold.example]
    reservation: 300
  - name: bronze
    domains: [bronze.example]
    reservation: 50
`

func writeUserConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "study.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUserConfigKeepsTheStudyAndTakesTheWiring: the lab's own link,
// handoff, control and admin replace the user's; every other line stays
// on its line; the key file is the lab's.
func TestUserConfigKeepsTheStudyAndTakesTheWiring(t *testing.T) {
	path := writeUserConfig(t, userYAML)
	text, replaced, err := UserFrontendConfig(path, "/run/qsplice/x")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(replaced, ",") != "link,handoff,control" {
		t.Errorf("replaced %v", replaced)
	}
	got, want := strings.Split(text, "\n"), strings.Split(userYAML, "\n")
	for i, line := range want[:len(want)-1] { // the last is after the final newline
		owned := i >= 1 && i <= 5 // link, handoff and control's three lines
		if owned && got[i] != "" || !owned && got[i] != line {
			t.Errorf("line %d: %q, user wrote %q", i+1, got[i], line)
		}
	}
	for _, s := range []string{"interface: eth0", "handoff: " + HandoffAddr, "listen: " + controlAddr, "key_file: /run/qsplice/x/key", "admin: " + adminAddr} {
		if !strings.Contains(text, s) {
			t.Errorf("the lab's wiring lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "ens3") || strings.Contains(text, "/etc/qsplice") {
		t.Errorf("the user's wiring survived:\n%s", text)
	}
}

// TestUserConfigErrorsNameTheUsersLine: a mistake in the study is
// reported at its file and line, and listeners off the lab's VIP, flow
// style files and missing files are refused with a reason.
func TestUserConfigErrorsNameTheUsersLine(t *testing.T) {
	bad := strings.Replace(userYAML, "reservation: 50", "reservaton: 50", 1)
	path := writeUserConfig(t, bad)
	_, _, err := UserFrontendConfig(path, "/run/qsplice/x")
	if err == nil || !strings.Contains(err.Error(), path+":17") || !strings.Contains(err.Error(), "reservaton") {
		t.Errorf("error %v, want %s:17 and the unknown key", err, path)
	}
	offVIP := strings.Replace(userYAML, "vip: 198.18.0.100", "vip: 10.0.0.100", 1)
	if _, _, err := UserFrontendConfig(writeUserConfig(t, offVIP), "/x"); err == nil || !strings.Contains(err.Error(), "not the lab's VIP") {
		t.Errorf("listener off the VIP: %v", err)
	}
	if _, _, err := UserFrontendConfig(writeUserConfig(t, "{link: {interface: a}, handoff: 1.2.3.4}\n"), "/x"); err == nil || !strings.Contains(err.Error(), "block style") {
		t.Errorf("flow style: %v", err)
	}
	if _, _, err := UserFrontendConfig(filepath.Join(t.TempDir(), "none.yaml"), "/x"); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestLabRunsAUsersConfig: a lab up with a user's configuration runs the
// front-end from it (its customers in /status) and serves through the VIP.
func TestLabRunsAUsersConfig(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	cfg.Backends = 1
	text, _, err := UserFrontendConfig(writeUserConfig(t, userYAML), cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.FrontendConfigText = text
	l := upLab(t, cfg)
	c := l.HTTPClient("c1")
	c.Timeout = 10 * time.Second
	getThroughVIP(t, c, 8080, 1<<10)
	resp, err := c.Get(AdminURL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Customers []struct{ Name string } `json:"customers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %v %s", err, resp.Status)
	}
	var names []string
	for _, c := range st.Customers {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "gold") || !strings.Contains(got, "bronze") {
		t.Errorf("the front-end's customers are %q, want the user's gold and bronze", got)
	}
}
