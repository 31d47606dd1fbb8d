package point

import (
	"time"

	"github.com/sweepflow/sweepflow/failure"
)

// Stage names. They are the values of the Stage search attribute, the keys of
// the results ledger and the words operators type (`--force perf`).
const (
	StageAllocate   = "allocate"
	StageCheckpoint = "checkpoint"
	StageBringUp    = "bringup"
	StageWarmup     = "warmup"
	StagePerf       = "perf"
	StageEval       = "eval"
	StageUpload     = "upload"
	StageTeardown   = "teardown"
	// StageLedger covers the small bookkeeping activities (reuse lookup,
	// records); it is not a stage of the chain but has options like one.
	StageLedger = "ledger"
	// StageProbe checks that a server handed over from the previous point
	// of a deployment still answers; like the ledger it has options but is
	// not a stage of the chain.
	StageProbe = "probe"
)

// Stage is one step of a point with its activity options and whether its
// output outlives the run.
type Stage struct {
	Name         string
	StartToClose time.Duration
	// Heartbeat is 0 for short stages that do not heartbeat.
	Heartbeat   time.Duration
	MaxAttempts int32
	// Reusable stages store their output in the ledger; `starter rerun`
	// reuses it when identity and measurement profile both match.
	Reusable bool
	// Operator stages can fail into the operator gate and take injected
	// faults; teardown and ledger bookkeeping cannot.
	Operator bool
}

// chain is the stage list in the order a point runs it. Bring-up allows
// 4 h of health waiting, as agentic recipes need.
var chain = []Stage{
	{Name: StageAllocate, StartToClose: 6 * time.Hour, Heartbeat: 2 * time.Minute, MaxAttempts: 3, Operator: true},
	{Name: StageCheckpoint, StartToClose: 3 * time.Hour, Heartbeat: 2 * time.Minute, MaxAttempts: 5, Operator: true},
	{Name: StageBringUp, StartToClose: 4*time.Hour + 30*time.Minute, Heartbeat: 2 * time.Minute, MaxAttempts: 3, Operator: true},
	{Name: StageWarmup, StartToClose: 45 * time.Minute, Heartbeat: time.Minute, MaxAttempts: 3, Operator: true},
	{Name: StagePerf, StartToClose: 2 * time.Hour, Heartbeat: time.Minute, MaxAttempts: 3, Reusable: true, Operator: true},
	{Name: StageEval, StartToClose: 2 * time.Hour, Heartbeat: time.Minute, MaxAttempts: 3, Reusable: true, Operator: true},
	{Name: StageUpload, StartToClose: 30 * time.Minute, Heartbeat: time.Minute, MaxAttempts: 10, Operator: true},
	{Name: StageTeardown, StartToClose: 20 * time.Minute, Heartbeat: time.Minute, MaxAttempts: 10},
}

var (
	ledgerStage = Stage{Name: StageLedger, StartToClose: 5 * time.Minute, MaxAttempts: 10}
	// The probe waits up to 30 min for the handed-over server to go idle.
	probeStage = Stage{Name: StageProbe, StartToClose: 35 * time.Minute, Heartbeat: time.Minute, MaxAttempts: 5}
)

// Stages returns the point's stage chain in order (a copy).
func Stages() []Stage { return append([]Stage(nil), chain...) }

// Lookup returns a stage (or the ledger pseudo-stage) by name.
func Lookup(name string) (Stage, bool) {
	switch name {
	case StageLedger:
		return ledgerStage, true
	case StageProbe:
		return probeStage, true
	}
	for _, s := range chain {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

// ReusableStages names the stages whose outputs a rerun may reuse.
func ReusableStages() []string { return names(func(s Stage) bool { return s.Reusable }) }

// OperatorStages names the stages that take injected faults and operator
// decisions.
func OperatorStages() []string { return names(func(s Stage) bool { return s.Operator }) }

func names(keep func(Stage) bool) []string {
	var out []string
	for _, s := range chain {
		if keep(s) {
			out = append(out, s.Name)
		}
	}
	return out
}

// Outcome is how a stage run of a point came out, as status, the ledger and
// the report show it.
type Outcome string

// Stage run outcomes.
const (
	OutcomeRunning   Outcome = "running"
	OutcomeOK        Outcome = "ok"
	OutcomeFailed    Outcome = "failed"
	OutcomeSkipped   Outcome = "skipped"
	OutcomeAborted   Outcome = "aborted"
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeReused: the output came from an earlier sweep (StageRun's
	// ReusedFrom says which).
	OutcomeReused Outcome = "reused"
	// OutcomeShared: the deployment's bring-up ran once for every point of
	// the deployment; it is booked where it ran.
	OutcomeShared Outcome = "shared"
	// OutcomeAllocationLost: the nodes went away during the stage.
	OutcomeAllocationLost Outcome = "allocation lost"
	// OutcomeReleased: the nodes were released while the stage waited for
	// an operator.
	OutcomeReleased Outcome = "released"
)

// StageRun records one stage of a point as operators see it: the point
// workflow's state and the ledger record carry it.
type StageRun struct {
	Stage   string    `json:"stage"`
	Outcome Outcome   `json:"outcome"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitempty"`
	// Rounds counts operator retries: round 1 is the first retry budget.
	Rounds int `json:"rounds"`
	// AutoRetries counts the retry budgets the point started by itself
	// after a heartbeat timeout.
	AutoRetries int    `json:"auto_retries,omitempty"`
	Error       string `json:"error,omitempty"`
	// Failures lists the stage's failed attempts as the workflow saw them
	// (the last attempt of each retry budget), with class and evidence.
	Failures []failure.Attempt `json:"failures,omitempty"`
	// ReusedFrom and ReusedRun name the sweep and run a reused output was
	// measured in.
	ReusedFrom string `json:"reused_from,omitempty"`
	ReusedRun  string `json:"reused_run,omitempty"`
}
