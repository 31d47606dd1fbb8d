package activities

import (
	"time"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// Stage names; the point package owns them and the stage list.
const (
	StageAllocate   = point.StageAllocate
	StageCheckpoint = point.StageCheckpoint
	StageBringUp    = point.StageBringUp
	StageWarmup     = point.StageWarmup
	StagePerf       = point.StagePerf
	StageEval       = point.StageEval
	StageUpload     = point.StageUpload
	StageTeardown   = point.StageTeardown
)

// DurableStages are the stages whose outputs outlive a run and can be reused
// by `starter rerun` when identity and measurement profile match.
var DurableStages = point.ReusableStages()

// Error types that no retry can fix. The workflow's retry policies list them
// as non-retryable, so they go straight to the operator gate.
const (
	ErrBadConfig        = "BadConfig"
	ErrChecksumMismatch = "ChecksumMismatch"
	ErrOutOfMemory      = "OutOfMemory"
	// ErrResultConflict: the ledger already holds different figures for the
	// same (sweep, identity, stage); writing them again cannot succeed.
	ErrResultConflict = "ResultConflict"
)

// Error types the retry policy retries.
const (
	// ErrAllocationLost: the nodes went away; the point re-allocates.
	ErrAllocationLost = "AllocationLost"
	// ErrInjectedFault: --inject-fault made the stage fail on purpose.
	ErrInjectedFault = "InjectedFault"
)

// The stage records are the cluster package's: an allocation, the
// checkpoint staging report and the running server (Endpoint), with the
// JSON recorded in workflow histories.
type (
	Allocation       = cluster.Allocation
	CheckpointOutput = cluster.StageReport
	Endpoint         = cluster.Server
)

// PerfSummary and EvalSummary are the point package's summaries.
type (
	PerfSummary = point.PerfSummary
	EvalSummary = point.EvalSummary
)

// ReuseRequest asks the ledger which durable stage outputs of a point can
// be reused from earlier sweeps.
type ReuseRequest struct {
	Point      point.Spec `json:"point"`
	Stages     []string   `json:"stages"`
	FromSweeps []string   `json:"from_sweeps"`
}

// Reused is what the ledger holds for a point that matches exactly (point
// identity and measurement profile), with the sweep and run each output was
// measured in, and for each stage that cannot be reused, why not.
type Reused struct {
	Perf      *PerfSummary `json:"perf,omitempty"`
	PerfSweep string       `json:"perf_sweep,omitempty"`
	PerfRun   string       `json:"perf_run,omitempty"`
	Eval      *EvalSummary `json:"eval,omitempty"`
	EvalSweep string       `json:"eval_sweep,omitempty"`
	EvalRun   string       `json:"eval_run,omitempty"`
	// Notes say why a stage found nothing to reuse ("perf: measurement
	// profile differs: time_scale 0.002 -> 0.01").
	Notes []string `json:"notes,omitempty"`
}

// ReuseSource is where a reused output was measured.
type ReuseSource struct {
	Sweep string `json:"sweep"`
	Run   string `json:"run,omitempty"`
}

// StageInput is the common input of the stages that run on an allocation.
type StageInput struct {
	Point    point.Spec `json:"point"`
	Alloc    Allocation `json:"alloc"`
	Endpoint *Endpoint  `json:"endpoint,omitempty"`
	Mode     string     `json:"mode,omitempty"` // bring-up: perf | eval
}

// UploadInput carries the durable outputs of a point to the results store.
type UploadInput struct {
	Point point.Spec   `json:"point"`
	Perf  *PerfSummary `json:"perf,omitempty"`
	Eval  *EvalSummary `json:"eval,omitempty"`
	// PerfFrom and EvalFrom are set when the output was reused.
	PerfFrom *ReuseSource `json:"perf_from,omitempty"`
	EvalFrom *ReuseSource `json:"eval_from,omitempty"`
}

// PointRecord is the ledger row of a point's final state.
type PointRecord struct {
	Point       point.Spec    `json:"point"`
	Status      string        `json:"status"`
	FailedStage string        `json:"failed_stage,omitempty"`
	Error       string        `json:"error,omitempty"`
	Stages      []StageTiming `json:"stages,omitempty"`
	// At is the workflow time of the record, so a late retry of an older
	// record cannot roll the point back.
	At time.Time `json:"at"`
}

// StageTiming is one stage of a point as the report shows it.
type StageTiming struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Rounds  int    `json:"rounds"`
	Error   string `json:"error,omitempty"`
	// Failures are the stage's failed attempts with class and evidence.
	Failures []failure.Attempt `json:"failures,omitempty"`
	Started  time.Time         `json:"started"`
	Ended    time.Time         `json:"ended,omitempty"`
}

// SweepRecord is the ledger row of a sweep.
type SweepRecord struct {
	SweepID    string    `json:"sweep_id"`
	Name       string    `json:"name"`
	Status     string    `json:"status"`
	ReuseFrom  []string  `json:"reuse_from,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitempty"`
	Nightly    bool      `json:"nightly,omitempty"`
	// Canaries are a canary sweep's groups with their verdicts, what
	// `starter report` says about them.
	Canaries []point.Canary `json:"canaries,omitempty"`
	// Adaptive is each adaptive key's search (deployments, added points,
	// an slo's result), what `starter report` draws.
	Adaptive []adaptive.Key `json:"adaptive,omitempty"`
}

// servedModel is the model name requests to ep must carry.
func servedModel(p point.Spec, ep *Endpoint) string {
	if ep != nil && ep.Model != "" {
		return ep.Model
	}
	return p.Model
}
