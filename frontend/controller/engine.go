package controller

import (
	"time"

	"github.com/qsplice/qsplice/splice"
)

// Engine is what the controller asks of the packet engine: the calls of
// splice.FrontEnd that act on a flow the engine reported. *splice.FrontEnd
// implements it; the tests and the simulator bring their own.
type Engine interface {
	Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error
	// DispatchCarrying is Dispatch for a request that goes at once: its
	// Splice may carry it (proto.SpliceRequest in the EvSplice's).
	DispatchCarrying(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error
	Reject(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error
	RejectFollowUp(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error
	HoldSplice(id splice.FlowID, now splice.Time) error
	SpliceAcked(id splice.FlowID, now splice.Time, out *splice.Output) error
	Admit(id splice.FlowID, now splice.Time, out *splice.Output) error
	Abort(id splice.FlowID, now splice.Time, out *splice.Output) error
	ResponseEnded(id splice.FlowID, re splice.ResponseEnd, now splice.Time, out *splice.Output) error
}

var _ Engine = (*splice.FrontEnd)(nil)

// The pool of C2s (splice/fe_pool.go): engine calls an Engine without a
// pool (the simulator's) does not have.
var (
	_ PoolDropper  = (*splice.FrontEnd)(nil)
	_ Redispatcher = (*splice.FrontEnd)(nil)
)

// PoolDropper resets the pooled C2s to a back-end that restarted:
// splice.FrontEnd.DropPool.
type PoolDropper interface {
	DropPool(backend uint32, now splice.Time, out *splice.Output) int
}

// Redispatcher dispatches a flow again on a new C2 after the shim
// refused the Splice that gave it a pooled one:
// splice.FrontEnd.RedispatchRefused.
type Redispatcher interface {
	RedispatchRefused(id splice.FlowID, carry bool, now splice.Time, out *splice.Output) error
}
