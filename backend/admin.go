package backend

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"time"

	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// Status is the shim's state as /status reports it: the totals over all
// workers, then each worker's shard.
type Status struct {
	ID          uint32           `json:"id"`
	Registered  bool             `json:"registered"`
	Entries     int              `json:"entries"`
	Active      int              `json:"active"`
	Shim        splice.ShimStats `json:"shim"` // PeakActive: over all shards at once
	Wire        link.Stats       `json:"wire"`
	TAP         link.Stats       `json:"tap"`
	KernelDrops uint64           `json:"kernel_drops"`
	Control     AgentStats       `json:"control"`
	Offloads    bool             `json:"offloads"`
	// TAPSteering: how the kernel picks a frame's TAP queue, "ports"
	// (every frame to the worker that owns its connection) or "flows"
	// (the tun driver's flow table; see HandedOver); empty with one queue.
	TAPSteering string `json:"tap_steering,omitempty"`
	// ReplyFastPath: "tcx: echo" (or "tcx: middle"; "tc: ..." on a
	// kernel without TCX, a clsact filter) when the kernel
	// translates replies (fastpath.go), else "off" and why; FastPath
	// counts what it sent, FastPathErrors the map updates that failed.
	ReplyFastPath  string              `json:"reply_fastpath"`
	FastPath       link.ReplyFastStats `json:"fast_path"`
	FastPathErrors uint64              `json:"fast_path_errors"`
	// SYNFastPath: "tcx: ingress" ("tc: ingress" without TCX) when the kernel takes the front-end's
	// SYNs with data from the wire (synfast.go), else "off" and why;
	// SYNFast counts them.
	SYNFastPath string            `json:"syn_fastpath"`
	SYNFast     link.SYNFastStats `json:"syn_fast_path"`
	Workers     []WorkerStatus    `json:"workers"`
	// Gathering (-gather, gather.go): whether worker 0 serves every
	// shard now, and how often the workers gathered and spread again.
	Gathered bool   `json:"gathered"`
	Gathers  uint64 `json:"gathers"`
	Spreads  uint64 `json:"spreads"`
	// ControlSent counts the control datagrams sent to the front-end
	// straight on the wire and through the socket (wirecontrol.go).
	ControlSent ControlSent `json:"control_sent"`
}

// ControlSent counts control datagrams by the way they left.
type ControlSent struct {
	Wire   uint64 `json:"wire"`
	Socket uint64 `json:"socket"`
}

// WorkerStatus is one worker's shard.
type WorkerStatus struct {
	Entries     int              `json:"entries"`
	Active      int              `json:"active"`
	Shim        splice.ShimStats `json:"shim"`
	Wire        link.Stats       `json:"wire"`
	TAP         link.Stats       `json:"tap"` // its TAP queue (offload path)
	KernelDrops uint64           `json:"kernel_drops"`
	TxErrors    uint64           `json:"tx_errors"`
	// HandedOver counts TAP frames this worker read for a flow another
	// worker owns and passed on; HandoffsLost those it had to drop.
	HandedOver   uint64 `json:"handed_over"`
	HandoffsLost uint64 `json:"handoffs_lost"`

	// Receive moderation (issue 7, moderate.go): the loop's passes, and
	// those that began with a hold.
	Passes  uint64 `json:"passes"`
	RxHolds uint64 `json:"rx_holds"`
	// CPUSeconds is the CPU time the worker's thread used, as its loop
	// last read it for gathering (gather.go; 0 without): gathered,
	// worker 0's includes the other shards' passes.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Thread is the Linux thread id of the worker's loop (to find it in
	// /proc, perf or top -H).
	Thread int `json:"thread"`
}

// shardStatus is a worker's answer to a status request.
type shardStatus struct {
	id         int
	ws         WorkerStatus
	registered bool
	control    *AgentStats // worker 0
	sent       ControlSent // worker 0
}

// status snapshots the worker's shard, in its own loop.
func (w *worker) status() shardStatus {
	st := shardStatus{id: w.id, ws: WorkerStatus{
		Entries: w.shim.Entries(), Active: w.shim.Active(), Shim: w.shim.Stats(), Wire: w.wire.Stats(),
		KernelDrops: w.drops.Load(), TxErrors: w.txErrors.Load(),
		HandedOver: w.handoffs.Load(), HandoffsLost: w.handoffLost.Load(),
		Passes: w.passes.Load(), RxHolds: w.holds.Load(),
		CPUSeconds: time.Duration(w.loopCPU.Load()).Seconds(), Thread: int(w.tid.Load()),
	}}
	if w.tap != nil {
		st.ws.TAP = w.tap.Stats()
	}
	if w.agent != nil {
		c := w.agent.Stats()
		st.control, st.registered = &c, w.agent.Registered()
		st.sent = ControlSent{Wire: w.ctlOut.wire, Socket: w.ctlOut.socket}
	}
	return st
}

// collectStatus asks every worker for its shard and adds them up.
func (d *Daemon) collectStatus(timeout time.Duration) (Status, error) {
	reply := make(chan shardStatus, len(d.workers))
	for _, w := range d.workers {
		w.post(mail{kind: mailStatus, status: reply})
	}
	st := Status{ID: d.cfg.ID, Offloads: d.cfg.Offloads, TAPSteering: d.tapSteering, ReplyFastPath: d.fastState, Workers: make([]WorkerStatus, len(d.workers))}
	if d.fast != nil {
		fs, err := d.fast.Stats()
		if err != nil {
			return Status{}, fmt.Errorf("the reply fast path's counters: %w", err)
		}
		st.FastPath = fs
	}
	st.SYNFastPath = d.synState
	if d.synFast != nil {
		ss, err := d.synFast.Stats()
		if err != nil {
			return Status{}, fmt.Errorf("the SYN fast path's counters: %w", err)
		}
		st.SYNFast = ss
	}
	for _, w := range d.workers {
		st.FastPathErrors += w.fastErrors.Load()
	}
	expire := time.NewTimer(timeout)
	defer expire.Stop()
	for range d.workers {
		var s shardStatus
		select {
		case s = <-reply:
		case <-expire.C:
			return Status{}, fmt.Errorf("a worker did not answer within %v", timeout)
		case <-d.done:
			return Status{}, fmt.Errorf("stopping")
		}
		st.Workers[s.id] = s.ws
		if s.control != nil {
			st.Control, st.Registered, st.ControlSent = *s.control, s.registered, s.sent
		}
	}
	for _, ws := range st.Workers {
		st.Entries += ws.Entries
		st.Active += ws.Active
		st.KernelDrops += ws.KernelDrops
		addCounters(&st.Shim, ws.Shim)
		addCounters(&st.Wire, ws.Wire)
		addCounters(&st.TAP, ws.TAP)
	}
	if d.plainTAP != nil {
		st.TAP = d.plainTAP.Stats()
	}
	if g := d.gather; g != nil {
		st.Gathered = g.Want()
		st.Gathers, st.Spreads = g.Counts()
	}
	// A sum of per-shard peaks could exceed any moment's total.
	st.Shim.PeakActive = uint64(d.peak.Load())
	for _, ws := range st.Workers {
		st.Shim.PeakActive = max(st.Shim.PeakActive, ws.Shim.PeakActive)
	}
	return st, nil
}

// addCounters adds every uint64 field of *b to the same field of *a: the
// counters of splice.ShimStats and link.Stats, whichever they are.
func addCounters[T any](a *T, b T) {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b)
	for i := range av.NumField() {
		if f := av.Field(i); f.Kind() == reflect.Uint64 && f.CanSet() {
			f.SetUint(f.Uint() + bv.Field(i).Uint())
		}
	}
}

// startAdmin serves /status and /metrics; the workers answer both from
// their loops.
func (d *Daemon) startAdmin() (*http.Server, error) {
	ln, err := net.Listen("tcp", d.cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("backend: admin %s: %w", d.cfg.Admin, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := d.collectStatus(2 * time.Second)
		if err != nil {
			http.Error(w, "event loop busy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	collector := shimCollector{status: func() (Status, error) { return d.collectStatus(2 * time.Second) }}
	mux.Handle("/metrics", exposition.Handler(exposition.NewRegistry(collector)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}
