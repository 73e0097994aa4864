package backend

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// Status is the shim's state as /status reports it.
type Status struct {
	ID          uint32            `json:"id"`
	Registered  bool              `json:"registered"`
	Entries     int               `json:"entries"`
	Active      int               `json:"active"`
	Shim        splice.ShimStats  `json:"shim"`
	Wire        link.Stats        `json:"wire"`
	TAP         link.Stats        `json:"tap"`
	KernelDrops uint64            `json:"kernel_drops"`
	Control     AgentStats        `json:"control"`
	Extra       map[string]string `json:"extra,omitempty"`
}

func (d *Daemon) status() Status {
	return Status{
		ID: d.cfg.ID, Registered: d.agent.Registered(), Entries: d.shim.Entries(), Active: d.shim.Active(),
		Shim: d.shim.Stats(), Wire: d.wire.Stats(), TAP: d.tap.Stats(), KernelDrops: d.drops,
		Control: d.agent.Stats(),
	}
}

// startAdmin serves /status; requests are answered by the loop.
func (d *Daemon) startAdmin() (*http.Server, error) {
	ln, err := net.Listen("tcp", d.cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("backend: admin %s: %w", d.cfg.Admin, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		reply := make(chan Status, 1)
		select {
		case d.adminReq <- reply:
		case <-time.After(2 * time.Second):
			http.Error(w, "event loop busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(<-reply)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}
