package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/proto"
)

// Running a user's configuration in the lab (`qsplice-lab up -config
// FILE`, issue 11). The file says what a researcher studies -- customers,
// classes, policies, listeners, scheduler settings -- while the lab owns
// its wiring: the interface, the handoff address, the control socket and
// its key, the admin address. So the lab keeps every line of the user's
// file where it is and blanks the top-level sections it owns (the lines
// stay, blank, so that an error in the user's part names the user's file
// and line), then appends its own. The result is checked as `qsplice-frontend
// validate` checks a file, before anything is built.

// labOwnedSections are the top-level keys the lab writes itself.
var labOwnedSections = []string{"link", "handoff", "control", "admin"}

// UserFrontendConfig reads the front-end configuration at path and returns
// it as the lab runs it, with its state directory stateDir (where the
// control key will be), and the sections of the user's file the lab
// replaced. Errors name the user's file and line.
func UserFrontendConfig(path, stateDir string) (text string, replaced []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("lab: -config: %w", err)
	}
	lines, replaced, err := blankSections(path, data)
	if err != nil {
		return "", nil, err
	}
	body := strings.Join(lines, "\n")
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	labPart := func(keyFile string) string {
		return fmt.Sprintf("# Written by qsplice-lab: the lab's wiring.\nlink: {interface: %s, type: afpacket}\nhandoff: %s\nadmin: %s\ncontrol: {listen: %s, key_file: %s}\n",
			hostDev, HandoffAddr, adminAddr, controlAddr, keyFile)
	}
	// Checked with a key of its own: the lab's is made when it is built.
	tmp, err := os.MkdirTemp("", "qsplice-lab-config-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	key := filepath.Join(tmp, "key")
	if err := proto.WriteKeyFile(key, proto.GenerateKey()); err != nil {
		return "", nil, err
	}
	if err := checkUserConfig(path, []byte(body+labPart(key))); err != nil {
		return "", nil, err
	}
	return body + labPart(filepath.Join(stateDir, "key")), replaced, nil
}

// blankSections returns data's lines with the top-level sections the lab
// owns blanked, and their names.
func blankSections(path string, data []byte) ([]string, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("lab: -config %s: %w", path, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("lab: -config %s: not a mapping of sections", path)
	}
	top := doc.Content[0]
	lines := strings.Split(string(bytes.TrimRight(data, "\n")), "\n")
	var replaced []string
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if !slices.Contains(labOwnedSections, k.Value) {
			continue
		}
		if top.Style&yaml.FlowStyle != 0 {
			return nil, nil, fmt.Errorf("lab: -config %s:%d: %s: write the file in block style so the lab can replace its wiring", path, k.Line, k.Value)
		}
		end := len(lines) // up to the next top-level key
		if i+2 < len(top.Content) {
			end = top.Content[i+2].Line - 1
		}
		for l := k.Line - 1; l < end; l++ {
			lines[l] = ""
		}
		replaced = append(replaced, k.Value)
	}
	return lines, replaced, nil
}

// checkUserConfig checks the merged configuration as `qsplice-frontend
// validate` does, and that its listeners are on the lab's VIP.
func checkUserConfig(path string, merged []byte) error {
	f, err := conf.Parse(path, merged)
	if err != nil {
		return err
	}
	var errs []error
	for i, l := range f.Listeners {
		if l.VIP.String() != VIP {
			errs = append(errs, fmt.Errorf("%s: listeners[%d].vip: %v is not the lab's VIP %s", path, i, l.VIP, VIP))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cfg, err := frontend.FromFile(f)
	if err != nil {
		return err
	}
	return frontend.Check(cfg)
}
