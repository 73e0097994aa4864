package benchproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// upLab builds the qsplice lab the benchmark measures: one client, the
// front-end, one back-end with nginx and the shim (capacity 64, so that
// the back-end's slots never limit the loads). With daemons false only
// the network is built: the run still needs the lab's link settings.
func upLab(ctx context.Context, name, stateDir, binDir string, sizes []int64, daemons bool) (*lab.Lab, error) {
	cfg := lab.DefaultConfig(name)
	cfg.StateDir = stateDir
	if binDir != "" {
		cfg.BinDir = binDir
	}
	cfg.Backends, cfg.Clients = 1, 1
	cfg.Nginx, cfg.TestServer, cfg.Daemons = daemons, false, daemons
	cfg.Capacity = 64
	cfg.Files = sizes
	cfg.ReadyTimeout = 30 * time.Second
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := clientSysctls(l.NS("c1")); err != nil {
		return l, err
	}
	return l, nil
}

// labPid returns the pid of one of the lab's processes.
func labPid(l *lab.Lab, name string) (int, error) {
	for _, p := range l.Processes() {
		if p.Name == name {
			if !p.Alive {
				return 0, fmt.Errorf("lab process %s is not running: %s", name, p.Detail)
			}
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("lab has no process %s", name)
}

// Lab process names (tools/lab's).
const (
	labFrontend = "frontend"
	labShim     = "backend-b1"
)

// frontendFrames returns the frames the front-end has read and written.
func frontendFrames(ctx context.Context, l *lab.Lab) (uint64, error) {
	raw, err := l.FetchFrontendStatus(ctx)
	if err != nil {
		return 0, fmt.Errorf("front-end /status: %w", err)
	}
	var st frontend.Status
	if err := json.Unmarshal(raw.Raw, &st); err != nil {
		return 0, fmt.Errorf("front-end /status: %w", err)
	}
	return st.LinkStat.RxFrames + st.LinkStat.TxFrames, nil
}

// shimFrames returns the frames the shim has read and written on the
// wire and on its TAP.
func shimFrames(ctx context.Context, l *lab.Lab) (uint64, error) {
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), lab.BackendAdminPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("shim /status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("shim /status: %s", resp.Status)
	}
	var st backend.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("shim /status: %w", err)
	}
	return st.Wire.RxFrames + st.Wire.TxFrames + st.TAP.RxFrames + st.TAP.TxFrames, nil
}
