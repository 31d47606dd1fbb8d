package point

import "time"

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

// IsReusable reports whether a stage's output may be reused across runs.
func IsReusable(name string) bool {
	s, ok := Lookup(name)
	return ok && s.Reusable
}

func names(keep func(Stage) bool) []string {
	var out []string
	for _, s := range chain {
		if keep(s) {
			out = append(out, s.Name)
		}
	}
	return out
}
