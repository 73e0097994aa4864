package lab

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
)

func (l *Lab) statePath(elem ...string) string {
	return filepath.Join(append([]string{l.cfg.StateDir}, elem...)...)
}

// KeyPath is the file with the shared key of the control protocol.
func (l *Lab) KeyPath() string { return l.statePath(keyFile) }

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
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	// WriteFile's mode applies only to new files; a leftover key file
	// might be more permissive, so set the mode explicitly too.
	if err := os.WriteFile(l.KeyPath(), []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return os.Chmod(l.KeyPath(), 0o600)
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
	case configFile, keyFile, pidDir, logDir, wwwDir, nginxDir:
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
