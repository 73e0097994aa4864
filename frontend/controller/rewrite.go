package controller

import (
	"log/slog"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Rewriter is the engine call that serves a request from a content tree
// (issue 10): splice.FrontEnd.Rewrite. An Engine without it (the
// simulator's, which models a tree's cost itself) is told nothing.
type Rewriter interface {
	Rewrite(id splice.FlowID, path []byte) error
}

var _ Rewriter = (*splice.FrontEnd)(nil)

// rewriteForTree asks the engine, just before flow's request goes to its
// back-end (Dispatch, Admit), to send it with its path rewritten to the
// tree the feedback policy chose, when that is below M: the content
// adaptor's decision, carried out. It returns the tree the request is
// served from: r.Tree, or M when the engine could not rewrite it (a
// target without a path of its own; a pipelined follow-up while the last
// rewritten one is unacknowledged), which is then served as sent.
func (c *Controller) rewriteForTree(flow splice.FlowID, r sched.Request, out *Output) uint8 {
	fc := c.fb
	if fc == nil || r.Tree == 0 || int(r.Tree) >= fc.m {
		return r.Tree
	}
	rw, ok := c.eng.(Rewriter)
	if !ok {
		return r.Tree // an engine that models a tree's cost itself (tools/sim)
	}
	c.treePath = sched.AppendTreePath(c.treePath[:0], fc.treePath, r.Tree, r.Path)
	if err := rw.Rewrite(flow, c.treePath); err != nil {
		fc.rewriteFailed++
		if c.logs(slog.LevelDebug) {
			c.log(out, slog.LevelDebug, "request not rewritten; served at full quality", "flow", flow,
				"path", r.Path, "tree", r.Tree, "err", err)
		}
		return uint8(fc.m)
	}
	fc.rewritten++
	return r.Tree
}
