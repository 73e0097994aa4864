package backend

import (
	"errors"
	"fmt"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// The kernel's reply fast path in the daemon (issue 7): the program and
// its maps (splice/link/replyfast.go) are opened once for all workers;
// each worker applies its engine's commands (splice/shim_fastpath.go) to
// the entries of its own connections, so no two workers write one entry.

// FastPathMode says what the kernel's reply fast path may send. The
// daemon's flag defaults to FastPathEcho; Config's zero value is off.
//
// FastPathEcho also sends the other replies of a response from the
// kernel, as echoes, which takes the shim's wake-up off a response's
// first byte when the connection's Put wins the race with the first
// reply; it puts an entry per connection from the Splice to the
// connection's end (docs/results.md, twenty-first, twenty-fifth and
// twenty-seventh sessions: the three orders of frames that kept the
// kernel from a keep-alive response's middle with echoes are fixed).
// FastPathMiddle only sends the middle of a response, with an entry only
// while a response is in its middle.
type FastPathMode string

// The fast path's modes.
const (
	FastPathOff    FastPathMode = "off"
	FastPathMiddle FastPathMode = "middle" // the replies between a response's first and last
	FastPathEcho   FastPathMode = "echo"   // and the others, as echoes
)

// FastPathUsage documents the -reply-fastpath flag.
const FastPathUsage = "let the kernel translate replies (a TC program on the TAP's egress, through TCX on Linux 6.6+, else a clsact filter; needs CAP_BPF and CAP_NET_ADMIN, else a warning says why and every reply crosses the shim; /status: reply_fastpath): echo (the replies between a response's first and last, never copied through this process, and the others too, whose originals come back to the shim marked as sent, which takes the shim's wake-up off a response's first byte); middle (only the replies between a response's first and last); off (every reply crosses the shim)"

// ParseFastPathMode reads the -reply-fastpath flag's value.
func ParseFastPathMode(s string) (FastPathMode, error) {
	switch m := FastPathMode(s); m {
	case "", FastPathOff, FastPathMiddle, FastPathEcho:
		return m, nil
	}
	return "", fmt.Errorf("reply-fastpath %q: want off, middle or echo", s)
}

// openReplyFastPath loads the program and attaches it to the TAP's
// egress, or leaves the daemon without it, saying why.
func (d *Daemon) openReplyFastPath(wireIndex, tapIndex int) {
	if d.cfg.ReplyFastPath == "" || d.cfg.ReplyFastPath == FastPathOff {
		d.fastState = "off"
		return
	}
	fp, err := link.NewReplyFastPath(wireIndex, maxFastPathEntries)
	if err == nil {
		if err = fp.AttachEgress(tapIndex); err != nil {
			fp.Close()
		}
	}
	if err != nil {
		d.fastState = "off: " + err.Error()
		d.log.Warn("no reply fast path: every reply crosses the shim", bpfErrArgs(err)...)
		return
	}
	d.fast, d.fastState = fp, string(fp.Hook())+": "+string(d.cfg.ReplyFastPath)
}

// bpfErrArgs are the log arguments of a fast path the daemon could not
// load or attach: the error, and what to grant when it was refused.
func bpfErrArgs(err error) []any {
	args := []any{"err", err}
	if errors.Is(err, unix.EPERM) {
		args = append(args, "hint", "grant CAP_BPF (contrib/systemd/qsplice-backend.service; README, \"Privileges\")")
	}
	return args
}

// maxFastPathEntries bounds the connections the kernel translates at
// once: the shim's own bound on splices (splice.ShimConfig.MaxEntries).
const maxFastPathEntries = 65536

// applyFastPaths applies the pass's fast-path commands, in order: with
// ahead, before the pass's wire frames are sent, those marked Ahead (a
// connection's first Put, whose replies none of those frames carry: the
// kernel's first reply is then often translated by the kernel rather
// than waiting for this pass); without, the rest once they are sent (a
// Put lets the kernel send replies that must not overtake them). Of
// several commands for one connection only the last Put is applied: each
// supersedes the one before, so a connection's Deletes come before its
// Put, and the batch (link.FastPathBatch: one system call for the
// Deletes, one for the Puts) keeps that order. It reports how many
// commands it left.
func (w *worker) applyFastPaths(ahead bool) (left int) {
	ups := w.out.FastPaths
	b := &w.fastBatch
	b.Reset()
	for i, u := range ups {
		if !u.Delete && supersededPut(ups[i+1:], u.Key) {
			continue
		}
		if u.Ahead != ahead {
			left++
			continue
		}
		if u.Delete {
			b.Delete(u.Key)
		} else {
			b.Put(u.Key, u.Entry)
		}
	}
	if b.Len() == 0 {
		return left
	}
	if failed, err := w.d.fast.Apply(b); failed > 0 {
		// Those entries stay the shim's: their replies keep crossing it.
		if w.fastErrors.Add(uint64(failed)) == uint64(failed) {
			w.d.log.Warn("reply fast path: a map update failed; those replies cross the shim", "err", fmt.Errorf("worker %d: %w", w.id, err))
		}
	}
	return left
}

// supersededPut reports whether a later command names key.
func supersededPut(later []splice.FastPathUpdate, key wire.FastPathKey) bool {
	for _, u := range later {
		if u.Key == key {
			return true
		}
	}
	return false
}
