package benchproxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestNginxProxyUpstreamPooledOrFresh checks the two nginx proxy
// configurations: pooled keeps upstream connections alive (a pool, and
// no "Connection: close" passed to the back-end), fresh has neither, so
// nginx falls back to its default of closing after each response.
func TestNginxProxyUpstreamPooledOrFresh(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		var b bytes.Buffer
		if err := proxyNginxConf.Execute(&b, confParams{Dir: "/d", Root: "/r", FreshUpstream: fresh}); err != nil {
			t.Fatal(err)
		}
		conf := b.String()
		for _, directive := range []string{"keepalive 64;", `proxy_set_header Connection "";`} {
			if got := strings.Contains(conf, directive); got == fresh {
				t.Errorf("fresh=%v: %q in the configuration is %v\n%s", fresh, directive, got, conf)
			}
		}
		for _, directive := range []string{"proxy_pass http://backend;", "proxy_http_version 1.1;", "keepalive_timeout 75s;"} {
			if !strings.Contains(conf, directive) {
				t.Errorf("fresh=%v: %q missing\n%s", fresh, directive, conf)
			}
		}
	}
}

// TestTableSaysWhichNginx: a run with -nginx-upstream fresh says so in
// the table's header, and one with the pool does not, so two tables
// side by side cannot be mistaken for each other; the setting survives
// result.json.
func TestTableSaysWhichNginx(t *testing.T) {
	const note = "nginx: a new upstream connection per request"
	r := sampleResult()
	if strings.Contains(r.Table(), note) {
		t.Errorf("a pooled run's table says %q", note)
	}
	r.Settings.FreshUpstream = true
	if !strings.Contains(r.Table(), note) {
		t.Errorf("a fresh run's table lacks %q:\n%s", note, r.Table())
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Settings.FreshUpstream || !strings.Contains(string(data), `"nginx_fresh_upstream":true`) {
		t.Errorf("result.json lost the setting: %s", data)
	}
	// The plot names the bar too, in every panel nginx has one.
	for _, p := range r.panels() {
		for _, b := range p.bars {
			if b.system == SystemNginx && b.name != "nginx, fresh" {
				t.Errorf("panel %q calls fresh nginx %q", p.title, b.name)
			}
		}
	}
	r.Settings.FreshUpstream = false
	for _, p := range r.panels() {
		for _, b := range p.bars {
			if want := systemNames[b.system]; b.name != want {
				t.Errorf("panel %q calls %s %q, want %q", p.title, b.system, b.name, want)
			}
		}
	}
}
