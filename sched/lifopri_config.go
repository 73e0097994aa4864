package sched

import (
	"fmt"
	"time"
)

// Mode selects how LifoPri orders its queues. The two FIFO modes are the
// baselines of the published experiment.
type Mode uint8

const (
	// ModeLifoPri: transaction queues above browsing queues, the queue
	// with the largest length x utility first within a group, browsing
	// queues LIFO while the cluster is overloaded.
	ModeLifoPri Mode = iota
	// ModeEightFIFO: the same queues in the same order, always FIFO.
	ModeEightFIFO
	// ModeSingleFIFO: one FIFO queue of SingleCap requests for all
	// classes.
	ModeSingleFIFO
)

func (m Mode) String() string {
	switch m {
	case ModeLifoPri:
		return "lifo-pri"
	case ModeEightFIFO:
		return "eight-fifo"
	case ModeSingleFIFO:
		return "single-fifo"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Defaults for the zero fields of LifoPriConfig.
const (
	// DefaultLifoUpper turns LIFO on only when the cluster is saturated:
	// below about 95% busy, queues stay short and FIFO waiting times stay
	// well under the clients' patience, so LIFO would only reorder
	// without saving anyone. Above it queues grow without bound, FIFO
	// ends up serving requests whose clients have already given up, and
	// serving the newest request first is what keeps browsing useful.
	DefaultLifoUpper = 0.95
	// DefaultLifoLower turns LIFO off again. The 10-point gap is about
	// three standard deviations of a utilization measured over one
	// second at the published 1250 req/s (roughly 1100 completions,
	// about 3% relative noise), so measurement noise alone does not make
	// the discipline flap between intervals. It is also the 85% that the
	// content-adaptation controller holds the cluster at, so a cluster
	// held there serves browsing FIFO.
	DefaultLifoLower = 0.85
	// DefaultSingleCap is the single queue's capacity in ModeSingleFIFO,
	// as in the published baseline.
	DefaultSingleCap = 100
)

// LifoPriConfig configures a LifoPri policy. Zero fields take the
// defaults.
type LifoPriConfig struct {
	// Classes are the request classes, in the order Snapshot reports
	// them and ties are broken; nil means DefaultClasses(). Patterns are
	// not used here (the front-end classifies, see Classifier).
	Classes []Class
	// Upper and Lower are the utilization thresholds (see
	// UtilizationMeter) of the hysteresis: browsing queues turn LIFO
	// when SetUtilization reports more than Upper and FIFO again when it
	// reports less than Lower. 0 means DefaultLifoUpper and
	// DefaultLifoLower; Lower must not exceed Upper.
	Upper, Lower float64
	Mode         Mode
	// SingleCap is the capacity of the one queue of ModeSingleFIFO, where
	// the classes' QueueCaps do not apply. 0 means DefaultSingleCap.
	SingleCap int
	// QueueTimeout is how long a request may wait before Expire removes
	// it; 0 means no limit (in the published model the clients time out
	// by themselves).
	QueueTimeout time.Duration
}

// withDefaults checks cfg and returns it with its zero fields filled in.
// The caller's slices are not modified. Errors name the offending field.
func (cfg LifoPriConfig) withDefaults() (LifoPriConfig, error) {
	if cfg.Classes == nil {
		cfg.Classes = DefaultClasses()
	}
	classes, err := checkClasses(cfg.Classes)
	if err != nil {
		return cfg, err
	}
	cfg.Classes = classes
	if len(classes) == 0 {
		return cfg, fmt.Errorf("sched: Classes: need at least one class")
	}
	if cfg.Upper == 0 {
		cfg.Upper = DefaultLifoUpper
	}
	if cfg.Lower == 0 {
		cfg.Lower = DefaultLifoLower
	}
	switch {
	case !finite(cfg.Upper) || cfg.Upper < 0:
		return cfg, fmt.Errorf("sched: Upper: must be a finite number > 0")
	case !finite(cfg.Lower) || cfg.Lower < 0:
		return cfg, fmt.Errorf("sched: Lower: must be a finite number > 0")
	case cfg.Lower > cfg.Upper:
		return cfg, fmt.Errorf("sched: Lower: %v is above Upper %v", cfg.Lower, cfg.Upper)
	case cfg.Mode > ModeSingleFIFO:
		return cfg, fmt.Errorf("sched: Mode: unknown %v", cfg.Mode)
	case cfg.SingleCap < 0:
		return cfg, fmt.Errorf("sched: SingleCap: must not be negative")
	case cfg.QueueTimeout < 0:
		return cfg, fmt.Errorf("sched: QueueTimeout: must not be negative")
	}
	if cfg.SingleCap == 0 {
		cfg.SingleCap = DefaultSingleCap
	}
	return cfg, nil
}
