package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/qsplice/qsplice/proto"
)

// Layout of the state directory. Everything the lab writes lives here, so
// that Down can remove exactly what Up created and nothing else.
const (
	configFile = "lab.json"
	keyFile    = "key"
	pidDir     = "pids"
	logDir     = "logs"
	wwwDir     = "www"
	nginxDir   = "nginx" // nginx temp paths and its own pid file
	binCopyDir = "bin"   // daemon binaries their user could not reach where they were (privilege.go)
	// userConfigFile is Config.FrontendConfigText, the front-end's
	// configuration when a user gave one (userconfig.go).
	userConfigFile = "frontend.yaml"
)

func (l *Lab) statePath(elem ...string) string {
	return filepath.Join(append([]string{l.cfg.StateDir}, elem...)...)
}

// KeyPath is the file with the control protocol's master key (the
// front-end's).
func (l *Lab) KeyPath() string { return l.statePath(keyFile) }

// BackendKeyPath is the file with back-end k's control key, derived from
// the master key.
func (l *Lab) BackendKeyPath(k int) string { return l.statePath(keyFile + "-b" + strconv.Itoa(k)) }

// LogPath is the log file (stdout and stderr) of a lab process.
func (l *Lab) LogPath(process string) string { return l.statePath(logDir, process+".log") }

func (l *Lab) pidPath(process string) string { return l.statePath(pidDir, process+".pid") }

// initState creates the state directory with a fresh key and the config
// record. The record goes first so that a crash during Up leaves enough
// behind for Down to clean up.
func (l *Lab) initState() error {
	dir := l.cfg.StateDir
	if err := checkStateDirOwned(dir); err != nil {
		return err
	}
	for _, d := range []string{dir, l.statePath(pidDir), l.statePath(logDir), l.statePath(wwwDir), l.statePath(nginxDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	data, err := json.MarshalIndent(l.cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.statePath(configFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if l.cfg.FrontendConfigText != "" {
		if err := os.WriteFile(l.statePath(userConfigFile), []byte(l.cfg.FrontendConfigText), 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	// The control protocol's master key for the front-end, and for each
	// back-end the key derived from it for its id (what `qsplice-frontend
	// genkey` and `derivekey` make). Leftover files go first: the key
	// files refuse to replace a file, so no stale, more permissive one
	// can survive.
	master := proto.GenerateKey()
	if err := writeKey(l.KeyPath(), master); err != nil {
		return err
	}
	for k := 1; k <= l.cfg.Backends; k++ {
		key, err := proto.DeriveKey(master, uint32(k))
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := writeKey(l.BackendKeyPath(k), key); err != nil {
			return err
		}
	}
	return l.chownKeys()
}

// writeKey writes a key file afresh (mode 0600).
func writeKey(path string, key []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab: %w", err)
	}
	if err := proto.WriteKeyFile(path, key); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

func readConfig(stateDir string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(filepath.Join(stateDir, configFile))
	if errors.Is(err, os.ErrNotExist) {
		return cfg, fmt.Errorf("lab: %s: %w", stateDir, errNoLab)
	}
	if err != nil {
		return cfg, fmt.Errorf("lab: %w", err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("lab: %s: %w", filepath.Join(stateDir, configFile), err)
	}
	return cfg, nil
}

// isStateEntry tells whether a top-level name in a state directory is one
// the lab creates.
func isStateEntry(name string) bool {
	switch name {
	case configFile, keyFile, pidDir, logDir, wwwDir, nginxDir, binCopyDir, userConfigFile, vmDir:
		return true
	}
	if rest, ok := strings.CutPrefix(name, keyFile+"-b"); ok { // a back-end's key
		_, err := strconv.Atoi(rest)
		return err == nil
	}
	if strings.HasPrefix(name, impairPrefix) { // a host's impairment (impair.go)
		return true
	}
	return strings.HasPrefix(name, "nginx-") && strings.HasSuffix(name, ".conf")
}

// checkStateDirOwned refuses a state directory that holds files the lab
// did not create: Down removes the directory, and must never take a user's
// files with it (think -state-dir /tmp).
func checkStateDirOwned(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lab: state dir: %w", err)
	}
	for _, e := range entries {
		if !isStateEntry(e.Name()) {
			return fmt.Errorf("lab: state dir %s holds %q, which the lab did not create; choose an empty or new directory", dir, e.Name())
		}
	}
	return nil
}

// removeState deletes what the lab created in the state directory and
// then the directory itself. keepFiles keeps the generated web content, so
// that a rebuild does not regenerate large files.
func removeState(dir string, keepFiles bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lab: state dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !isStateEntry(e.Name()) || (keepFiles && e.Name() == wwwDir) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if keepFiles {
		return errors.Join(errs...)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("lab: state dir %s left in place: %w", dir, err))
	}
	return errors.Join(errs...)
}
