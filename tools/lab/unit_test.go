package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestOffloadsStillOn(t *testing.T) {
	show := `Features for eth0:
rx-checksumming: on
tx-checksumming: off
	tx-checksum-ipv4: off [fixed]
	tx-checksum-ip-generic: on
tcp-segmentation-offload: on [fixed]
generic-segmentation-offload: off [requested on]
generic-receive-offload: on
large-receive-offload: off [fixed]
`
	got := offloadsIn(show, "on")
	want := []string{"generic-receive-offload: on"}
	if !slices.Equal(got, want) {
		t.Fatalf("offloadsIn(on) = %q, want %q (fixed features and sub-features do not count)", got, want)
	}
	if got := offloadsIn(strings.ReplaceAll(show, "generic-receive-offload: on", "generic-receive-offload: off"), "on"); len(got) != 0 {
		t.Fatalf("all off: got %q", got)
	}
}

func TestNormalized(t *testing.T) {
	good := DefaultConfig("lab1")
	if _, err := good.normalized(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"uppercase name":  func(c *Config) { c.Name = "Lab" },
		"long name":       func(c *Config) { c.Name = "abcdefghi" },
		"dash in name":    func(c *Config) { c.Name = "a-b" },
		"no back-ends":    func(c *Config) { c.Backends = 0 },
		"too many b":      func(c *Config) { c.Backends = MaxBackends + 1 },
		"too many c":      func(c *Config) { c.Clients = MaxClients + 1 },
		"negative file":   func(c *Config) { c.Files = []int64{-1} },
		"negative client": func(c *Config) { c.Clients = -1 },
	} {
		c := DefaultConfig("lab1")
		mutate(&c)
		if _, err := c.normalized(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := Config{Name: "x", Backends: 1}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != "/run/qsplice/x" || c.Clients != 1 || c.Capacity != 5 || c.ReadyTimeout <= 0 {
		t.Fatalf("defaults not filled in: %+v", c)
	}
}

func TestAddressPlan(t *testing.T) {
	l := newLab(DefaultConfig("abc"))
	if got := l.NS("c1"); got != "qs-abc-c1" {
		t.Errorf("NS(c1) = %s", got)
	}
	if got := l.BackendAddr(3).String(); got != "198.18.0.23" {
		t.Errorf("BackendAddr(3) = %s", got)
	}
	if got := l.BackendMAC(12).String(); got != "02:00:c6:12:00:20" {
		t.Errorf("BackendMAC(12) = %s, want ...:20 (20+12 = 0x20)", got)
	}
	if got := l.ClientAddr(1).String(); got != "198.18.0.10" {
		t.Errorf("ClientAddr(1) = %s", got)
	}
	// The highest addresses stay below the VIP.
	if got := l.BackendAddr(MaxBackends).String(); got != "198.18.0.99" {
		t.Errorf("BackendAddr(max) = %s", got)
	}
	if got := l.ClientAddr(MaxClients).As4()[3]; got >= 21 {
		t.Errorf("ClientAddr(max) = .%d collides with back-ends", got)
	}
}

func TestNginxConf(t *testing.T) {
	cfg := DefaultConfig("abc")
	cfg.StateDir = "/st"
	l := newLab(cfg)
	conf, err := l.renderNginxConf(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"daemon off;", "worker_processes 1;", "pid /st/nginx/b2/nginx.pid;",
		"error_log /st/logs/nginx-b2.log", "access_log off;", "listen 80 fastopen=256;",
		"root /st/www/b2;", "location /data/ {}", "add_header X-Backend-Id 2 always;",
		"sendfile on;", "keepalive_timeout 75s;", "client_body_temp_path /st/nginx/b2/",
		"proxy_temp_path /st/", "fastcgi_temp_path /st/", "uwsgi_temp_path /st/", "scgi_temp_path /st/",
	} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
}

func TestProcessesFollowConfig(t *testing.T) {
	cfg := DefaultConfig("abc")
	cfg.Backends = 2
	cfg.BackendArgs = []string{"-x", "1"}
	l := newLab(cfg)
	var names []string
	for _, p := range l.processes() {
		names = append(names, p.name)
	}
	want := []string{"testserver-b1", "nginx-b1", "testserver-b2", "nginx-b2", "backend-b1", "backend-b2", "frontend"}
	if !slices.Equal(names, want) {
		t.Fatalf("processes = %v, want %v", names, want)
	}
	be, err := l.spec("backend-b2")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(be.argv[1:], " ")
	wantArgs := fmt.Sprintf("-id 2 -wire eth0 -tap tap0 -addr 198.18.0.22 -frontend 198.18.0.2:7400 -control-port 7401 -web-ports 80,8080 -handoff 198.18.0.101 -capacity 5 -key %s/key-b2 -tap-mac 02:00:c6:12:00:16 -admin 198.18.0.22:7404 -offloads=true -workers %d -x 1", cfg.StateDir, runtime.NumCPU())
	if got != wantArgs {
		t.Fatalf("backend-b2 args:\n got %s\nwant %s", got, wantArgs)
	}
	ts, err := l.spec("testserver-b2")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ts.argv[1:], " "), "-listen :8080 -id 2 -service-time 0s -fast-open 256"; got != want {
		t.Fatalf("testserver-b2 args:\n got %s\nwant %s", got, want)
	}
	if _, err := l.spec("backend-b3"); err == nil {
		t.Fatal("spec of a missing back-end succeeded")
	}
	cfg.Daemons, cfg.Nginx = false, false
	if got := len(newLab(cfg).processes()); got != 2 {
		t.Fatalf("test servers only: %d processes, want 2", got)
	}
}

func TestStateDirOwnership(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{configFile, keyFile, keyFile + "-b1", "nginx-b1.conf"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, wwwDir, "b1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkStateDirOwned(dir); err != nil {
		t.Fatalf("lab's own files refused: %v", err)
	}
	if err := removeState(dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, wwwDir, "b1")); err != nil {
		t.Fatalf("keepFiles removed www: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFile)); !os.IsNotExist(err) {
		t.Fatalf("key survived removeState: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkStateDirOwned(dir); err == nil {
		t.Fatal("foreign file accepted")
	}
	if err := removeState(dir, false); err == nil {
		t.Fatal("removeState removed a directory holding a foreign file")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("foreign file removed: %v", err)
	}
}

func TestPidRuns(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if alive, detail := pidRuns(os.Getpid(), filepath.Base(exe)); !alive {
		t.Fatalf("this process is not alive: %s", detail)
	}
	if alive, _ := pidRuns(os.Getpid(), "nginx"); alive {
		t.Fatal("this process passed for nginx")
	}
	if alive, _ := pidRuns(1<<22+1, "x"); alive {
		t.Fatal("a pid above pid_max is alive")
	}
}

func TestLogTail(t *testing.T) {
	cfg := DefaultConfig("abc")
	cfg.StateDir = t.TempDir()
	l := newLab(cfg)
	if err := os.MkdirAll(filepath.Dir(l.LogPath("x")), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(l.LogPath("x"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(l.logTail("x", 20), "\n")
	if len(got) != 20 || got[0] != "line 11" || got[19] != "line 30" {
		t.Fatalf("tail = %q", got)
	}
	if !strings.Contains(l.logTail("missing", 20), "no log") {
		t.Fatal("missing log not reported")
	}
}

// With content trees, nginx serves /tree<k>/data/ and names the tree of
// every answer; nginx -t accepts the configuration.
func TestNginxConfTrees(t *testing.T) {
	cfg := DefaultConfig("abc")
	cfg.StateDir = t.TempDir()
	cfg.Trees = 3
	cfg.Files = []int64{1 << 20}
	l := newLab(cfg)
	conf, err := l.renderNginxConf(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"map $uri $content_tree", "~^/tree(?<k>[0-9]+)/ $k;", "default 3;",
		"add_header X-Content-Tree $content_tree always;", "location ~ ^/tree[0-9]+/data/ {}"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	plain, _ := newLab(DefaultConfig("abc")).renderNginxConf(1)
	if strings.Contains(string(plain), "tree") {
		t.Errorf("config without trees mentions them:\n%s", plain)
	}
	if err := l.prepareNginx(1); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(l.nginxParams(1).ErrorLog), 0o755)
	out, err := exec.Command(nginxPath(), "-t", "-c", l.nginxConfPath(1), "-p", l.nginxParams(1).Dir, "-e", l.nginxParams(1).ErrorLog).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	for tree, want := range []int64{0, 1 << 20 / 3, 2 << 20 / 3, 1 << 20} {
		if tree == 0 {
			continue
		}
		fi, err := os.Stat(l.TreeDataPath(1, 1<<20, tree))
		if err != nil || fi.Size() != want {
			t.Errorf("tree %d file: %v, want %d bytes", tree, err, want)
		}
	}
}

// TCP Fast Open (Config.FastOpen, on by default): nginx listens with
// fastopen=256, the test server gets -fast-open 256, a VM back-end's init
// sets the sysctl; off, none of it, and the setting is in lab.json. nginx
// -t accepts both configurations.
func TestFastOpenConfig(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := DefaultConfig("abc")
		if !cfg.FastOpen {
			t.Fatal("DefaultConfig: TCP Fast Open off")
		}
		cfg.StateDir = t.TempDir()
		cfg.Files = []int64{1 << 10}
		cfg.FastOpen = on
		l := newLab(cfg)
		conf, err := l.renderNginxConf(1)
		if err != nil {
			t.Fatal(err)
		}
		wantListen, queue := "listen 80;", "0"
		if on {
			wantListen, queue = "listen 80 fastopen=256;", "256"
		}
		if !strings.Contains(string(conf), "\n        "+wantListen+"\n") {
			t.Errorf("FastOpen %v: config lacks %q:\n%s", on, wantListen, conf)
		}
		if !on && strings.Contains(string(conf), "fastopen") {
			t.Errorf("FastOpen off: config mentions fastopen:\n%s", conf)
		}
		ts, err := l.spec("testserver-b1")
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(ts.argv, "-fast-open"); i < 0 || i+1 >= len(ts.argv) || ts.argv[i+1] != queue {
			t.Errorf("FastOpen %v: test server runs as %q, want -fast-open %s", on, ts.argv, queue)
		}
		init := l.vmInit(1)
		if got := strings.Contains(init, "\necho 3 > /proc/sys/net/ipv4/tcp_fastopen\n"); got != on {
			t.Errorf("FastOpen %v: VM init sets tcp_fastopen=3: %v\n%s", on, got, init)
		}
		if !strings.Contains(init, "'-fast-open' '"+queue+"'") {
			t.Errorf("FastOpen %v: VM init's test server lacks -fast-open %s:\n%s", on, queue, init)
		}

		if err := l.initState(); err != nil {
			t.Fatal(err)
		}
		recorded, err := readConfig(cfg.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		if recorded.FastOpen != on {
			t.Errorf("lab.json records FastOpen %v, want %v", recorded.FastOpen, on)
		}

		if err := l.prepareNginx(1); err != nil {
			t.Fatal(err)
		}
		p := l.nginxParams(1)
		out, err := exec.Command(nginxPath(), "-t", "-c", l.nginxConfPath(1), "-p", p.Dir, "-e", p.ErrorLog).CombinedOutput()
		if err != nil {
			t.Fatalf("FastOpen %v: nginx -t: %v\n%s", on, err, out)
		}
	}
}

// The guests' /init loads virtio_net with napi_tx=0 (guestInitHead says
// why) and every other module as it is: its module loop, run in sh with
// an insmod that records its arguments.
func TestGuestInitLoadsVirtioNetWithoutTxNAPI(t *testing.T) {
	dir := t.TempDir()
	start := strings.Index(guestInitHead, "for m in")
	end := strings.Index(guestInitHead, "\ndone\n")
	if start < 0 || end < start {
		t.Fatalf("no module loop in guestInitHead:\n%s", guestInitHead)
	}
	loop := guestInitHead[start : end+len("\ndone\n")]
	loop = strings.ReplaceAll(loop, "/etc/qsplice/modules", dir+"/modules")
	loop = strings.ReplaceAll(loop, "/lib/modules/", dir+"/lib/")
	mods := "kernel/drivers/virtio/virtio.ko\nkernel/drivers/net/virtio_net.ko\nkernel/net/packet/af_packet.ko.xz\n"
	if err := os.WriteFile(filepath.Join(dir, "modules"), []byte(mods), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\necho \"$@\" >> " + dir + "/log\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "insmod"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", loop)
	cmd.Env = []string{"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("module loop: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	want := dir + "/lib/kernel/drivers/virtio/virtio.ko\n" +
		dir + "/lib/kernel/drivers/net/virtio_net.ko napi_tx=0\n" +
		dir + "/lib/kernel/net/packet/af_packet.ko.xz\n"
	if string(got) != want {
		t.Errorf("insmod ran as\n%s\nwant\n%s", got, want)
	}
}
