package benchproxy

import (
	"fmt"
	"strings"

	"github.com/qsplice/qsplice/tools/netns"
)

// Offloads are the segmentation and checksum offloads of a link. The
// proxy chain's links get the ones the qsplice lab's links have, so that
// every system moves its bytes over the same kind of link (lab.Config's
// Offloads says which).
type Offloads struct {
	TX  bool `json:"tx_checksum"`
	TSO bool `json:"tso"`
	GSO bool `json:"gso"`
	GRO bool `json:"gro"`
}

// offloadFeatures pairs ethtool -K's short names with the names
// ethtool -k shows.
var offloadFeatures = []struct{ set, show string }{
	{"tx", "tx-checksumming"},
	{"tso", "tcp-segmentation-offload"},
	{"gso", "generic-segmentation-offload"},
	{"gro", "generic-receive-offload"},
}

func (o *Offloads) field(i int) *bool {
	return [...]*bool{&o.TX, &o.TSO, &o.GSO, &o.GRO}[i]
}

// ParseOffloads reads the four features from ethtool -k output.
func ParseOffloads(show string) (Offloads, error) {
	state := make(map[string]string)
	for _, line := range strings.Split(show, "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "\t") {
			state[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	var o Offloads
	for i, f := range offloadFeatures {
		v, ok := state[f.show]
		if !ok {
			return o, fmt.Errorf("ethtool -k shows no %s", f.show)
		}
		switch {
		case strings.HasPrefix(v, "on"):
			*o.field(i) = true
		case strings.HasPrefix(v, "off"):
		default:
			return o, fmt.Errorf("ethtool -k: %s: %q", f.show, v)
		}
	}
	return o, nil
}

func (o Offloads) String() string {
	var parts []string
	for i, f := range offloadFeatures {
		v := "off"
		if *o.field(i) {
			v = "on"
		}
		parts = append(parts, f.set+" "+v)
	}
	return strings.Join(parts, ", ")
}

func (o Offloads) ethtoolArgs() []string {
	var args []string
	for i, f := range offloadFeatures {
		v := "off"
		if *o.field(i) {
			v = "on"
		}
		args = append(args, f.set, v)
	}
	return args
}

// readOffloads returns a device's offloads.
func readOffloads(ns, dev string) (Offloads, error) {
	out, err := netns.Command(ns, "ethtool", "-k", dev).CombinedOutput()
	if err != nil {
		return Offloads{}, fmt.Errorf("ethtool -k %s in %s: %v: %s", dev, ns, err, strings.TrimSpace(string(out)))
	}
	return ParseOffloads(string(out))
}

// setOffloads sets a device's offloads and checks that they took: ethtool
// -K fails as a whole when one feature cannot change, and says little.
func setOffloads(ns, dev string, want Offloads) error {
	setOut, setErr := netns.Command(ns, append([]string{"ethtool", "-K", dev}, want.ethtoolArgs()...)...).CombinedOutput()
	got, err := readOffloads(ns, dev)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s in %s: offloads are %v, want %v (ethtool -K: %v: %s)",
			dev, ns, got, want, setErr, strings.TrimSpace(string(setOut)))
	}
	return nil
}
