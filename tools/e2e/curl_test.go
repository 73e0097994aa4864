package e2e

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
)

// fetched is one response as curl saw it.
type fetched struct {
	status  int
	backend int
	size    int64
	sha     [32]byte
}

// curlGet downloads url with curl inside host's namespace and hashes the
// body; the body goes to a temporary file, not through memory.
func curlGet(t testing.TB, l *lab.Lab, host, url string, extra ...string) fetched {
	t.Helper()
	dir := t.TempDir()
	body := filepath.Join(dir, "body")
	hdr := filepath.Join(dir, "headers")
	args := append([]string{"curl", "-sS", "--max-time", "60", "-o", body, "-D", hdr}, extra...)
	args = append(args, url)
	out, err := l.Command(host, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", url, err, out)
	}
	f := fetched{status: -1, backend: -1}
	hf, err := os.Open(hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	sc := bufio.NewScanner(hf)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "HTTP/") {
			if fields := strings.Fields(line); len(fields) >= 2 {
				f.status, _ = strconv.Atoi(fields[1])
			}
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "X-Backend-Id") {
			f.backend, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	bf, err := os.Open(body)
	if err != nil {
		if os.IsNotExist(err) { // curl creates no file for an empty body
			f.sha = sha256.Sum256(nil)
			return f
		}
		t.Fatal(err)
	}
	defer bf.Close()
	h := sha256.New()
	n, err := io.Copy(h, bf)
	if err != nil {
		t.Fatal(err)
	}
	f.size = n
	copy(f.sha[:], h.Sum(nil))
	return f
}

// checkBody asserts a /data/<size> response is the exact content of the
// back-end that served it.
func checkBody(t testing.TB, f fetched, size int64, url string) {
	t.Helper()
	if f.status != 200 {
		t.Fatalf("%s: status %d", url, f.status)
	}
	if f.backend < 1 || f.backend > backends {
		t.Fatalf("%s: X-Backend-Id %d not in 1..%d", url, f.backend, backends)
	}
	if f.size != size {
		t.Fatalf("%s from back-end %d: %d bytes, want %d", url, f.backend, f.size, size)
	}
	if want := content.SHA256(uint32(f.backend), size); f.sha != want {
		t.Fatalf("%s from back-end %d: sha256 %x, want %x", url, f.backend, f.sha, want)
	}
}

func vipURL(port int, size int64) string {
	return fmt.Sprintf("http://%s:%d/data/%s", lab.VIP, port, content.FormatSize(size))
}
