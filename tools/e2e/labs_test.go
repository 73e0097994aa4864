package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/qsplice/qsplice/tools/lab"
)

// extraLab builds a small lab of its own for one test (test server
// only, linger 1 s), adjusted by mod, and removes it when the test ends.
// prefix is one letter naming the test's labs.
func extraLab(t *testing.T, prefix string, mod func(cfg *lab.Config)) *lab.Lab {
	t.Helper()
	base := needLab(t)
	var suffix [3]byte
	rand.Read(suffix[:])
	cfg := lab.DefaultConfig(prefix + hex.EncodeToString(suffix[:]))
	cfg.BinDir = base.Config().BinDir
	cfg.StateDir = filepath.Join(sharedTempDir(t), "state")
	cfg.Nginx = false
	cfg.Files = nil
	cfg.BackendArgs = []string{"-linger", "1s"}
	if err := setOffloads(&cfg); err != nil {
		t.Fatal(err)
	}
	mod(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Down(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// eachTCP calls f for every IPv4/TCP frame of a capture file.
func eachTCP(t *testing.T, file string, f func(ip *layers.IPv4, tcp *layers.TCP)) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.NoCopy)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip != nil && tcp != nil {
			f(ip, tcp)
		}
	}
}

// sharedTempDir is a temporary directory the lab's daemons (nobody, with
// two capabilities) can search, unlike t.TempDir's; removed at the end.
// writableTempDir is a temporary directory the lab's daemons, which run
// as nobody, may create files in (a timeline, a capture), removed when
// the test ends.
func writableTempDir(t *testing.T) string {
	t.Helper()
	dir := sharedTempDir(t)
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := lab.SharedTempDir("qsplice-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
