package benchproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// The proxy chain: three namespaces joined by two veth pairs, in a /24
// of its own (the qsplice lab uses 198.18.0.0/24).
//
//	qsbp-ID-c            qsbp-ID-p                      qsbp-ID-b
//	client  eth0 ---- eth0  nginx  :8081  eth1 ---- eth0  nginx :80
//	.10/26            .2/26 HAProxy :8082 .65/26          .66/26
//	                  ip_forward on (the direct path)
//
// The proxies are L7 endpoints on both links; the direct path is the
// client talking to the back-end's address, forwarded by the middle
// namespace's kernel with no proxy in the way.
const (
	chainClientAddr  = "198.18.7.10"
	chainProxyAddr   = "198.18.7.2"  // the proxies listen here
	chainProxyBack   = "198.18.7.65" // the proxies' side towards the back-end
	chainBackendAddr = "198.18.7.66"
	chainPrefixLen   = 26
	chainClientNet   = "198.18.7.0"  // client -- proxy
	chainBackendNet  = "198.18.7.64" // proxy -- back-end

	nginxProxyPort = 8081
	haproxyPort    = 8082
	backendPort    = 80
)

// The chain's processes, as named in its logs and configurations.
const (
	backendNginxName = "backend-nginx"
	proxyNginxName   = "proxy-nginx"
	haproxyName      = "proxy-haproxy"
)

// chain is a built proxy chain.
type chain struct {
	prefix string // namespaces are prefix+"c", "p", "b"
	dir    string // configurations, logs, content
	procs  []*proc
	// freshUpstream: the nginx proxy keeps no upstream connection alive
	// (Options.FreshUpstream).
	freshUpstream bool
}

func (c *chain) ns(host string) string { return c.prefix + host }

func (c *chain) namespaces() []string { return []string{c.ns("c"), c.ns("p"), c.ns("b")} }

// buildChain creates the namespaces and links with the given offloads.
// On error the caller still calls down, which removes what exists.
func buildChain(c *chain, off Offloads) error {
	for _, ns := range c.namespaces() {
		if err := netns.Add(ns); err != nil {
			return err
		}
		for _, key := range []string{"ipv6/conf/all/disable_ipv6", "ipv6/conf/default/disable_ipv6"} {
			if err := sysctl(ns, key, "1"); err != nil {
				return err
			}
		}
	}
	cNS, pNS, bNS := c.ns("c"), c.ns("p"), c.ns("b")
	steps := []struct {
		ns   string
		cmds []string
	}{
		{pNS, []string{
			"link set lo up",
			"link add name eth0 type veth peer name eth0 netns " + cNS,
			"link add name eth1 type veth peer name eth0 netns " + bNS,
			fmt.Sprintf("addr add %s/%d dev eth0", chainProxyAddr, chainPrefixLen),
			fmt.Sprintf("addr add %s/%d dev eth1", chainProxyBack, chainPrefixLen),
			"link set eth0 up", "link set eth1 up",
		}},
		{cNS, []string{
			"link set lo up",
			fmt.Sprintf("addr add %s/%d dev eth0", chainClientAddr, chainPrefixLen),
			"link set eth0 up",
			fmt.Sprintf("route add %s/%d via %s", chainBackendNet, chainPrefixLen, chainProxyAddr),
		}},
		{bNS, []string{
			"link set lo up",
			fmt.Sprintf("addr add %s/%d dev eth0", chainBackendAddr, chainPrefixLen),
			"link set eth0 up",
			fmt.Sprintf("route add %s/%d via %s", chainClientNet, chainPrefixLen, chainProxyBack),
		}},
	}
	for _, s := range steps {
		if err := ipBatch(s.ns, s.cmds); err != nil {
			return err
		}
	}
	if err := sysctl(pNS, "ipv4/ip_forward", "1"); err != nil {
		return err
	}
	if err := clientSysctls(cNS); err != nil {
		return err
	}
	for _, d := range []struct{ ns, dev string }{{cNS, "eth0"}, {pNS, "eth0"}, {pNS, "eth1"}, {bNS, "eth0"}} {
		if err := setOffloads(d.ns, d.dev, off); err != nil {
			return err
		}
	}
	return nil
}

// clientSysctls widen a client's port range: one connection per request
// at tens of thousands a second would otherwise run out of ports.
func clientSysctls(ns string) error {
	if err := sysctl(ns, "ipv4/ip_local_port_range", "1024 65535"); err != nil {
		return err
	}
	return sysctl(ns, "ipv4/tcp_tw_reuse", "1")
}

// down stops the chain's processes, kills anything else left in its
// namespaces and deletes them; it carries on past errors.
func (c *chain) down() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop())
	}
	for _, ns := range c.namespaces() {
		if !netns.Exists(ns) {
			continue
		}
		if pids, err := netns.Pids(ns); err == nil {
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		errs = append(errs, netns.Delete(ns))
	}
	return errors.Join(errs...)
}

// startServers writes the content and configurations and starts the
// back-end nginx and the selected proxies, each ready when start returns.
func (c *chain) startServers(ctx context.Context, sizes []int64, proxies map[string]bool) error {
	root := filepath.Join(c.dir, "www")
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		return err
	}
	for _, size := range sizes {
		// Back-end id 1, as the qsplice lab's single back-end: the same bytes.
		if err := content.WriteFile(filepath.Join(root, "data", content.FormatSize(size)), 1, size); err != nil {
			return err
		}
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		return err
	}
	type server struct {
		name, ns, addr string
		conf           *template.Template
		argv           func(conf, dir string) []string
	}
	// -e: nginx opens its error log before it reads the configuration.
	nginxArgv := func(conf, dir string) []string {
		return []string{nginx, "-c", conf, "-p", dir + "/", "-e", filepath.Join(dir, "error.log")}
	}
	servers := []server{{backendNginxName, c.ns("b"), fmt.Sprintf("%s:%d", chainBackendAddr, backendPort), backendNginxConf, nginxArgv}}
	if proxies[SystemNginx] {
		servers = append(servers, server{proxyNginxName, c.ns("p"), fmt.Sprintf("%s:%d", chainProxyAddr, nginxProxyPort), proxyNginxConf, nginxArgv})
	}
	if proxies[SystemHAProxy] {
		haproxy, err := exec.LookPath("haproxy")
		if err != nil {
			return err
		}
		servers = append(servers, server{haproxyName, c.ns("p"), fmt.Sprintf("%s:%d", chainProxyAddr, haproxyPort), haproxyConf,
			func(conf, _ string) []string { return []string{haproxy, "-db", "-f", conf} }})
	}
	for _, s := range servers {
		dir := filepath.Join(c.dir, s.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(c.dir, s.name+".conf")
		if err := writeTemplate(conf, s.conf, confParams{Dir: dir, Root: root, FreshUpstream: c.freshUpstream}); err != nil {
			return err
		}
		p, err := startProc(c.dir, s.name, s.ns, s.argv(conf, dir)...)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		if err := p.waitListening(ctx, c.ns("c"), s.addr); err != nil {
			return err
		}
	}
	return nil
}

// proxyPids returns the processes of a proxy (master and workers).
func (c *chain) proxyPids(name string) ([]int, error) {
	for _, p := range c.procs {
		if p.name == name {
			return groupPids(p.cmd.Process.Pid)
		}
	}
	return nil, fmt.Errorf("no process %s in the chain", name)
}

type confParams struct {
	Dir  string // the server's private directory: pid, temp paths, error log
	Root string // document root, files under Root/data/
	// FreshUpstream: the nginx proxy keeps no upstream connection alive.
	FreshUpstream bool
}

func writeTemplate(path string, t *template.Template, p confParams) error {
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// nginxCommon is the part every nginx of the chain shares: foreground,
// root (the work directory may be private), nothing written outside its
// directory.
const nginxCommon = `daemon off;
master_process on;
user root;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log notice;
events {
    worker_connections 4096;
}
`

const nginxHTTPCommon = `    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;
`

// backendNginxConf serves the files as the qsplice lab's back-end nginx
// does (tools/lab/nginx.go): one worker, sendfile, long keep-alive.
var backendNginxConf = template.Must(template.New("backend").Parse(nginxCommon + `worker_processes 1;
http {
` + nginxHTTPCommon + `    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    server {
        listen ` + chainBackendAddr + `:80 backlog=4096;
        root {{.Root}};
        add_header X-Backend-Id 1 always;
        location /data/ {}
    }
}
`))

// proxyNginxConf is nginx as a plain HTTP/1.1 reverse proxy with a pool
// of keep-alive connections to the back-end. Responses stream through
// its memory buffers; temporary files are off, so a slow client costs
// no disk writes (what an L7 proxy for large objects would be set to).
// With FreshUpstream the pool is left out: nginx then asks the back-end
// to close after each response (its default "Connection: close") and
// connects anew for the next request, as the front-end opens C2.
var proxyNginxConf = template.Must(template.New("proxy-nginx").Parse(nginxCommon + `worker_processes auto;
http {
` + nginxHTTPCommon + `    keepalive_timeout 75s;
    keepalive_requests 1000000;
    upstream backend {
        server ` + chainBackendAddr + `:80;
{{- if not .FreshUpstream}}
        keepalive 64;
        keepalive_requests 1000000;
{{- end}}
    }
    server {
        listen ` + chainProxyAddr + `:8081 backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
{{- if not .FreshUpstream}}
            proxy_set_header Connection "";
{{- end}}
            proxy_max_temp_file_size 0;
        }
    }
}
`))

// haproxyConf is HAProxy in HTTP mode with keep-alive on both sides and
// idle back-end connections shared between clients.
var haproxyConf = template.Must(template.New("haproxy").Parse(`global
    maxconn 4096
    pidfile {{.Dir}}/haproxy.pid
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 75s
frontend proxy
    bind ` + chainProxyAddr + `:8082
    default_backend web
backend web
    server b1 ` + chainBackendAddr + `:80
`))

// ipBatch runs ip(8) commands in a namespace with one process.
func ipBatch(ns string, cmds []string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s: %v: %s\ncommands:\n%s", ns, err, strings.TrimSpace(string(out)), strings.Join(cmds, "\n"))
	}
	return nil
}

// sysctl writes /proc/sys/net/KEY in a namespace (the path resolves
// against the namespace of the writing thread).
func sysctl(ns, key, value string) error {
	path := filepath.Join("/proc/sys/net", filepath.Clean("/"+key))
	err := netns.Do(ns, func() error { return os.WriteFile(path, []byte(value), 0) })
	if err != nil {
		return fmt.Errorf("sysctl net/%s=%s in %s: %w", key, value, ns, err)
	}
	return nil
}
