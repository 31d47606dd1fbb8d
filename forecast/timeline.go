package forecast

import (
	"time"

	"github.com/sweepflow/sweepflow/point"
)

// Stage kinds a forecast accounts time to. Bring-up covers the checkpoint
// staging before it; queue wait holds no node.
const (
	KindQueue       = "queue-wait"
	KindBringUp     = "bring-up"
	KindWarmup      = "warmup"
	KindPerf        = "perf"
	KindEvalRestart = "eval-restart"
	KindEval        = "eval"
	KindTeardown    = "teardown"
)

// Kinds lists the kinds that hold nodes, in the order a point runs them.
var Kinds = []string{KindBringUp, KindWarmup, KindPerf, KindEvalRestart, KindEval, KindTeardown}

// Call is one stage activity as the workflows call it.
type Call struct {
	Activity string // the activity's registered name: Allocate, BringUp, ...
	Kind     string // one of the Kind constants, "" for bookkeeping
	Point    point.Spec
	Mode     string // bring-up: perf | eval
}

// Clock says how long a stage activity takes.
type Clock interface {
	Duration(c Call) time.Duration
}

// Event is one stage activity the workflows ran, in virtual time.
type Event struct {
	Call
	Start, End time.Time
}

// Timeline is what a simulated sweep did: every stage with its virtual
// start and end, the order in which points finished and the sweep's result.
type Timeline struct {
	Start, End time.Time
	Events     []Event
	// Finished is the point IDs in the order their point workflows ended.
	Finished []string
}

// Grid is the resolution a forecast counts stage times at: each stage
// takes whole seconds, so every instant a stage starts or ends at (the
// sweep's start plus stage times) is a whole second, its nominal instant,
// and the tie-breakers (below a millisecond) never move one to the next.
//
// A second, not less: while a child workflow starts on its goroutines,
// the environment's main loop waits and meanwhile fires the next timer
// once as much wall time has passed as virtual time lies before it. That
// timer ends at the same nominal instant (harmless: a stage counts from
// its nominal instant, not from when its workflow got to it) or a second
// or more later: a child would have to take a second of wall time to
// start for a later instant to come first.
const Grid = time.Second
