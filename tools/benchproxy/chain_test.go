package benchproxy

import (
	"bytes"
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
