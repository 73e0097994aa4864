package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/lab"
)

// dissectorFields are the fields the lab test reads from tshark, one
// column each.
var dissectorFields = []string{
	"frame.number", "frame.interface_id", "ip.src", "ip.dst", "udp.srcport", "udp.dstport",
	"qsplice.type", "qsplice.direction", "qsplice.backend", "qsplice.incarnation", "qsplice.seq",
	"qsplice.register.backend_id", "qsplice.register.ip", "qsplice.register.mac", "qsplice.register.control_port",
	"qsplice.register.capacity", "qsplice.register.incarnation", "qsplice.register.web_ports",
	"qsplice.registerack.backend_id", "qsplice.registerack.incarnation", "qsplice.registerack.keepalive_interval",
	"qsplice.splice.request_id", "qsplice.splice.client_ip", "qsplice.splice.client_port", "qsplice.splice.vip",
	"qsplice.splice.vip_port", "qsplice.splice.handoff_ip", "qsplice.splice.handoff_port", "qsplice.splice.backend_ip", "qsplice.splice.backend_port", "qsplice.splice.backend_id",
	"qsplice.splice.flags.implicit_ack", "qsplice.splice.flags.keeps_cookie",
	"qsplice.splice.reuse_server_next", "qsplice.splice.reuse_early",
	"qsplice.spliceack.request_id", "qsplice.spliceack.backend_id", "qsplice.spliceack.ok",
	"qsplice.feedback.request_id", "qsplice.feedback.backend_id", "qsplice.feedback.response_bytes",
	"_ws.expert.message",
}

// dissected is one frame as tshark and the dissector show it.
type dissected map[string]string

func (d dissected) typ() string { return d["qsplice.type"] }

// TestLabCaptureShowsControlMessagesInWireshark (issue 11, item 3): a
// front-end run with -capture FILE.pcapng writes its control datagrams
// into the capture, and tshark with contrib/wireshark/qsplice.lua shows
// every one of them with fields that agree with what the daemons logged
// and report in /status: the Register and RegisterAck of each back-end,
// and the Splice, SpliceAck and Feedback of each request made.
func TestLabCaptureShowsControlMessagesInWireshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark not installed, and CI=true: .ci/run installs it")
		}
		t.Skip("tshark not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "contrib", "wireshark", "qsplice.lua")
	// The daemons may run as another user: a directory anyone may write.
	dir, err := os.MkdirTemp("", "qsplice-dissector-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(dir, "frontend.pcapng")
	const backends = 2
	l := extraLab(t, "w", func(cfg *lab.Config) {
		cfg.Backends = backends
		cfg.FrontendArgs = []string{"-capture", capture, "-log-level", "debug", "-log-format", "json", "-linger", "1s"}
		cfg.BackendArgs = append(cfg.BackendArgs, "-log-format", "json")
	})
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(l.LogPath("frontend"))
			t.Logf("front-end log, last 3000 bytes:\n%s", b[max(0, len(b)-3000):])
		}
	})
	served := func() uint64 {
		var n uint64
		for _, b := range frontendStatus(t, l).Backends {
			n += b.Served
		}
		return n
	}
	before := served()

	// A few requests, each on a connection of its own, so that each is
	// one Splice; the client's address names it in the capture.
	type request struct {
		client  string
		backend string
		body    int
	}
	var reqs []request
	for i := range 4 {
		size := 1000 + 777*i
		client, backend, body := fetch(t, l, fmt.Sprintf("/data/%d", size))
		if body != size {
			t.Fatalf("request %d: %d body bytes, want %d", i, body, size)
		}
		reqs = append(reqs, request{client, backend, body})
	}
	// The Feedback of each follows its response; wait for them.
	deadline := time.Now().Add(10 * time.Second)
	for served() < before+uint64(len(reqs)) {
		if time.Now().After(deadline) {
			t.Fatalf("the front-end reports %d requests served, want %d", served(), before+uint64(len(reqs)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	fe := frontendStatus(t, l)
	shims := map[string]map[string]any{}
	for k := 1; k <= backends; k++ {
		shims[strconv.Itoa(k)] = backendStatus(t, l, k)
	}
	// Stop the front-end: the capture is whole, and nothing more comes.
	if err := l.StopProcess("frontend"); err != nil {
		t.Fatal(err)
	}

	frames := runDissector(t, tshark, script, capture, "")
	control := runDissector(t, tshark, script, capture, "frame.interface_id == 1")
	if len(control) == 0 {
		t.Fatal("no frame on the capture's control interface")
	}
	for _, f := range control {
		if f.typ() == "" {
			t.Errorf("frame %s on the control interface is not dissected as qsplice", f["frame.number"])
		}
	}
	for _, f := range frames {
		if m := f["_ws.expert.message"]; strings.ReplaceAll(m, "tag not verified: the dissector holds no key", "") != "" {
			t.Errorf("frame %s: the dissector says %q", f["frame.number"], m)
		}
		if f["frame.interface_id"] != "1" {
			t.Errorf("frame %s: a control datagram on interface %s, not the control interface", f["frame.number"], f["frame.interface_id"])
		}
	}
	comments := linkComments(t, tshark, capture)
	byType := map[string][]dissected{}
	for _, f := range frames {
		byType[f.typ()] = append(byType[f.typ()], f)
	}

	// Register and RegisterAck: what each shim announced, as the
	// front-end logged it and reports it, and the interval the shim
	// logged it was given.
	feLog := jsonLog(t, l.LogPath("frontend"))
	for k := 1; k <= backends; k++ {
		id := strconv.Itoa(k)
		bs := findBackend(&fe, uint32(k))
		if bs == nil {
			t.Fatalf("back-end %d not in the front-end's status", k)
		}
		logged := findLog(feLog, "back-end registered", "backend", id)
		if logged == nil {
			t.Fatalf("the front-end did not log back-end %d registering", k)
		}
		regs := filter(byType["1"], "qsplice.register.backend_id", id)
		if len(regs) == 0 {
			t.Fatalf("no Register of back-end %d in the capture", k)
		}
		var incarnation string
		for _, r := range regs {
			want := dissected{
				"qsplice.direction": "2", "qsplice.backend": id,
				"qsplice.register.ip": l.BackendAddr(k).String(), "qsplice.register.mac": l.BackendMAC(k).String(),
				"qsplice.register.control_port": "7401", "qsplice.register.web_ports": "80,8080",
				"qsplice.register.capacity":    strconv.Itoa(l.Config().Capacity),
				"qsplice.register.incarnation": r["qsplice.incarnation"], "ip.src": l.BackendAddr(k).String(),
			}
			agree(t, "Register", r, want)
			agree(t, "front-end status of Register", r, dissected{"qsplice.register.ip": bs.IP, "qsplice.register.mac": bs.MAC,
				"qsplice.register.capacity": strconv.Itoa(bs.Capacity)})
			agree(t, "front-end log of Register", r, dissected{"qsplice.register.ip": logText(logged["ip"]),
				"qsplice.register.mac": logText(logged["mac"]), "qsplice.register.capacity": logText(logged["capacity"])})
			incarnation = r["qsplice.register.incarnation"]
		}
		acks := filter(byType["2"], "qsplice.registerack.backend_id", id)
		if len(acks) == 0 {
			t.Fatalf("no RegisterAck to back-end %d in the capture", k)
		}
		shimLog := findLog(jsonLog(t, l.LogPath("backend-b"+id)), "registered with front-end")
		if shimLog == nil {
			t.Fatalf("shim %d did not log registering", k)
		}
		ms := shims[id]["control"].(map[string]any)["keepalive_millis"].(float64)
		for _, a := range acks {
			agree(t, "RegisterAck", a, dissected{"qsplice.direction": "1", "qsplice.backend": id,
				"qsplice.registerack.incarnation": incarnation, "ip.dst": l.BackendAddr(k).String(),
				"qsplice.registerack.keepalive_interval": logText(shimLog["keepalive"])})
			agree(t, "shim status of RegisterAck", a, dissected{
				"qsplice.registerack.keepalive_interval": strconv.FormatInt(int64(ms)*int64(time.Millisecond), 10)})
		}
	}

	// Each request: one Splice naming the client's connection and the
	// back-end that answered, then that back-end's SpliceAck and Feedback
	// with the same RequestID, in that order. A Splice sent with a SYN
	// that asks for Fast Open (flag bit 6, proto.SpliceImplicitAck) has
	// no SpliceAck when the kernel took the request in the SYN: the
	// SYN-ACK stood for it (counted below against the shims' counts).
	implied, keepsCookie, reused := 0, 0, 0
	for i, r := range reqs {
		clientIP, clientPort, _ := net.SplitHostPort(r.client)
		var splices []dissected
		for _, s := range byType["3"] {
			if s["qsplice.splice.client_ip"] == clientIP && s["qsplice.splice.client_port"] == clientPort {
				splices = append(splices, s)
			}
		}
		if len(splices) != 1 {
			t.Errorf("request %d from %s: %d Splices in the capture, want 1", i, r.client, len(splices))
			continue
		}
		s := splices[0]
		k, _ := strconv.Atoi(r.backend)
		agree(t, "Splice", s, dissected{"qsplice.direction": "1", "qsplice.backend": r.backend,
			"qsplice.splice.backend_id": r.backend, "qsplice.splice.vip": lab.VIP, "qsplice.splice.vip_port": "8080",
			"qsplice.splice.backend_ip": l.BackendAddr(k).String(), "qsplice.splice.backend_port": "8080",
			"ip.dst": l.BackendAddr(k).String(), "udp.dstport": "7401"})
		// The link's frames carry comments where the engine acted: the
		// cookie SYN-ACK to this client, the C2 SYN the Splice names.
		if n := len(commented(comments, "SYN cookie", "ip.dst", clientIP, "tcp.dstport", clientPort)); n == 0 {
			t.Errorf("request %d: no SYN-ACK to %s commented as a SYN cookie", i, r.client)
		}
		// A Splice onto a pooled C2 (Reuse) has no C2 SYN: the request
		// goes on the C2 the pool gave.
		reuse := s["qsplice.splice.reuse_server_next"] != ""
		c2Note := "handed off: C2 SYN"
		if reuse {
			reused++
			c2Note = "request bytes on C2"
		}
		if n := len(commented(comments, c2Note, "ip.src", s["qsplice.splice.handoff_ip"],
			"tcp.srcport", s["qsplice.splice.handoff_port"], "ip.dst", l.BackendAddr(k).String())); n == 0 {
			t.Errorf("request %d (reuse %v): no frame from %s:%s commented %q", i, reuse, s["qsplice.splice.handoff_ip"], s["qsplice.splice.handoff_port"], c2Note)
		}
		if findLog(feLog, "request", "client", r.client) == nil {
			t.Errorf("request %d: the front-end logged no request from %s", i, r.client)
		}
		id := s["qsplice.splice.request_id"]
		acks := filter(byType["4"], "qsplice.spliceack.request_id", id)
		fbs := filter(byType["5"], "qsplice.feedback.request_id", id)
		// No SpliceAck either for a request sent with its Splice on a
		// reused C2 (Reuse.Early): the server's ACK of it stands for one.
		implicit := s["qsplice.splice.flags.implicit_ack"] == "1" || s["qsplice.splice.reuse_early"] == "1"
		if s["qsplice.splice.flags.keeps_cookie"] == "1" {
			keepsCookie++
			if !implicit {
				t.Errorf("request %d: a Splice with bit 7 (keeps cookie) but not bit 6", i)
			}
		}
		if len(fbs) != 1 || len(acks) > 1 || len(acks) == 0 && !implicit {
			t.Errorf("request %d (RequestID %s, implicit ack %v): %d SpliceAcks and %d Feedbacks, want 1 of each (0 or 1 SpliceAck with an implicit ack)",
				i, id, implicit, len(acks), len(fbs))
			continue
		}
		if len(acks) == 0 {
			implied++
			continue
		}
		agree(t, "SpliceAck", acks[0], dissected{"qsplice.direction": "2", "qsplice.backend": r.backend,
			"qsplice.spliceack.backend_id": r.backend, "qsplice.spliceack.ok": "1", "ip.src": l.BackendAddr(k).String()})
		agree(t, "Feedback", fbs[0], dissected{"qsplice.direction": "2", "qsplice.backend": r.backend,
			"qsplice.feedback.backend_id": r.backend, "ip.src": l.BackendAddr(k).String()})
		if n, _ := strconv.Atoi(fbs[0]["qsplice.feedback.response_bytes"]); n < r.body {
			t.Errorf("request %d: Feedback reports %d response bytes, the body alone was %d", i, n, r.body)
		}
		sn, _ := strconv.Atoi(s["frame.number"])
		an, _ := strconv.Atoi(acks[0]["frame.number"])
		fn, _ := strconv.Atoi(fbs[0]["frame.number"])
		if !(sn < an && an < fn) {
			t.Errorf("request %d: Splice frame %d, SpliceAck %d, Feedback %d: out of order", i, sn, an, fn)
		}
	}

	// Every Splice and Feedback of the run is in the capture: as many
	// as the shims and the front-end count.
	for k := 1; k <= backends; k++ {
		id := strconv.Itoa(k)
		ctl := shims[id]["control"].(map[string]any)
		splices := len(filter(byType["3"], "qsplice.backend", id))
		feedbacks := len(filter(byType["5"], "qsplice.backend", id))
		if float64(splices) != ctl["splices"].(float64) || float64(feedbacks) != ctl["feedbacks"].(float64) {
			t.Errorf("back-end %d: the capture holds %d Splices and %d Feedbacks, the shim counts %v and %v",
				k, splices, feedbacks, ctl["splices"], ctl["feedbacks"])
		}
		if acks, implied := len(filter(byType["4"], "qsplice.backend", id)), ctl["splice_acks_implied"].(float64); float64(acks)+implied != float64(splices) {
			t.Errorf("back-end %d: the capture holds %d SpliceAcks for %d Splices, the shim counts %v acknowledged by the SYN-ACK",
				k, acks, splices, implied)
		}
		if bs := findBackend(&fe, uint32(k)); bs == nil || uint64(feedbacks) != bs.Served {
			t.Errorf("back-end %d: the capture holds %d Feedbacks, the front-end reports %+v", k, feedbacks, bs)
		}
	}
	t.Logf("%d of %d requests acknowledged by the SYN-ACK that took them in the SYN or by the server's ACK on a reused C2, %d Splices for a SYN asking the front-end's cookie, %d onto a reused C2", implied, len(reqs), keepsCookie, reused)
	if keepsCookie == 0 {
		// The front-end starts without cookies: its first SYN to a
		// back-end asks for one it keeps (proto.SpliceKeepsCookie).
		t.Errorf("no Splice of the front-end's first requests has bit 7 (keeps cookie)")
	}
	kinds := map[string]int{}
	for _, c := range comments {
		kinds[c["frame.comment"]]++
	}
	t.Logf("comments on the link's frames: %v", kinds)
	t.Logf("capture: %d frames of the link with comments, %d control datagrams: %d Register, %d RegisterAck, %d Splice, %d SpliceAck, %d Feedback, %d Keepalive, %d Close",
		len(comments), len(frames), len(byType["1"]), len(byType["2"]), len(byType["3"]), len(byType["4"]), len(byType["5"]), len(byType["6"]), len(byType["7"]))
}

// fetch makes one request to the VIP from c1 on a connection of its own
// and returns the client's address, the back-end that answered and the
// body's length.
func fetch(t *testing.T, l *lab.Lab, path string) (client, backend string, body int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := l.Dial(ctx, "c1", "tcp", net.JoinHostPort(lab.VIP, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, lab.VIP); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v, status %d", path, err, resp.StatusCode)
	}
	return c.LocalAddr().String(), resp.Header.Get("X-Backend-Id"), len(b)
}

// runDissector runs tshark with the dissector over capture and returns
// the qsplice frames (and filter, if any) with dissectorFields.
func runDissector(t *testing.T, tshark, script, capture, filter string) []dissected {
	t.Helper()
	display := "qsplice"
	if filter != "" {
		display = filter
	}
	args := []string{"-X", "lua_script:" + script, "-r", capture, "-Y", display, "-T", "fields",
		"-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range dissectorFields {
		args = append(args, "-e", f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tshark, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "Lua") || strings.Contains(s, "rror") || strings.Contains(s, "cut short") {
		t.Fatalf("tshark complains:\n%s", s)
	}
	var frames []dissected
	for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != len(dissectorFields) {
			t.Fatalf("tshark printed %d columns, want %d: %q", len(cols), len(dissectorFields), line)
		}
		f := dissected{}
		for i, name := range dissectorFields {
			f[name] = cols[i]
		}
		frames = append(frames, f)
	}
	return frames
}

// linkComments returns the frames of the capture's link interface that
// carry a comment, with their addresses and ports.
func linkComments(t *testing.T, tshark, capture string) []dissected {
	t.Helper()
	fields := []string{"frame.comment", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport"}
	args := []string{"-r", capture, "-Y", "frame.interface_id == 0 && frame.comment", "-T", "fields", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var frames []dissected
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) != len(fields) {
			continue
		}
		f := dissected{}
		for i, name := range fields {
			f[name] = cols[i]
		}
		frames = append(frames, f)
	}
	return frames
}

// commented returns the frames whose comment holds note and whose fields
// have the values of kv (pairs).
func commented(frames []dissected, note string, kv ...string) []dissected {
	var out []dissected
next:
	for _, f := range frames {
		if !strings.Contains(f["frame.comment"], note) {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if f[kv[i]] != kv[i+1] {
				continue next
			}
		}
		out = append(out, f)
	}
	return out
}

func filter(frames []dissected, field, value string) []dissected {
	var out []dissected
	for _, f := range frames {
		if f[field] == value {
			out = append(out, f)
		}
	}
	return out
}

// agree reports each field of want that f shows otherwise.
func agree(t *testing.T, what string, f, want dissected) {
	t.Helper()
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s (frame %s): %s = %q, want %q", what, f["frame.number"], k, f[k], v)
		}
	}
}

func findBackend(st *frontend.Status, id uint32) *controller.BackendStatus {
	for i := range st.Backends {
		if st.Backends[i].ID == id {
			return &st.Backends[i]
		}
	}
	return nil
}

// jsonLog reads a daemon's JSON log (-log-format json), one record a
// line; lines that are not JSON are skipped.
func jsonLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			recs = append(recs, m)
		}
	}
	return recs
}

// findLog returns the first record with message msg and, for each pair
// of kv, that attribute printed as that value.
func findLog(recs []map[string]any, msg string, kv ...string) map[string]any {
next:
	for _, r := range recs {
		if r["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if logText(r[kv[i]]) != kv[i+1] {
				continue next
			}
		}
		return r
	}
	return nil
}

// logText prints a JSON log attribute as the dissector prints the field:
// numbers in full (a duration's nanoseconds too), strings as they are.
func logText(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
