package activities

import (
	"encoding/json"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
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

// PointSpec is everything an activity needs to know about one sweep point.
// It is plain data (no secrets: tokens come from the worker's environment).
type PointSpec struct {
	SweepID string `json:"sweep_id"`
	// PointID is unique within a sweep: the exp-name plus the identity
	// (point.ID); it names the child workflow, the local job and scratch.
	PointID     string `json:"point_id"`
	ExpName     string `json:"exp_name,omitempty"`
	ConfigKey   string `json:"config_key"`
	Topology    string `json:"topology"`
	Conc        int    `json:"conc"`
	Nodes       int    `json:"nodes"`
	GPUs        int    `json:"gpus"`
	PrefillGPUs int    `json:"prefill_gpus"`
	DecodeGPUs  int    `json:"decode_gpus"`
	// Identity keys the ledger and reuse (point.Identity.String());
	// ProfileHash and Profile are the planned measurement profile.
	Identity    string        `json:"identity,omitempty"`
	ProfileHash string        `json:"profile_hash,omitempty"`
	Profile     point.Profile `json:"profile"`
	Eval        bool          `json:"eval"`
	Model       string        `json:"model"`
	ModelPrefix string        `json:"model_prefix"`
	Image       string        `json:"image"`
	RecipePath  string        `json:"recipe_path"`
	// RecipeDigest is the sha256 of the recipe bytes the identity was
	// computed from; the worker launches only a recipe file that has them.
	RecipeDigest string          `json:"recipe_sha256,omitempty"`
	Row          json.RawMessage `json:"row"`
	ISL          int             `json:"isl"`
	OSL          int             `json:"osl"`
	DurationSec  int             `json:"duration_sec"`
	// SyntheticAL is the golden acceptance length injected into the engine
	// for the perf stage only (0 means the engine's real acceptance).
	SyntheticAL float64 `json:"synthetic_al,omitempty"`
	// CheckpointSource is the checkpoint on the shared filesystem and
	// CheckpointPath the node-local path the engine loads; staging copies one
	// to the other on every node. Empty source: nothing to stage.
	CheckpointSource string `json:"checkpoint_source,omitempty"`
	CheckpointPath   string `json:"checkpoint_path,omitempty"`
	// Deployment shorthand the simulator understands ("2P1D DEP16/DEP32").
	Deployment string `json:"deployment"`
	// Faults injected on purpose (chaos testing, demos of the operator gate).
	Faults []Fault `json:"faults,omitempty"`
	// BaselineKey is the point's identity apart from the image
	// (point.BaselineKey), so a nightly on a new image still finds last
	// night's figures.
	BaselineKey string `json:"baseline_key,omitempty"`
	// WarmupSkipped is set by the point workflow on the perf and upload
	// inputs when an operator skipped the warmup stage: the figures were
	// measured on a cold server, and their profile says so.
	WarmupSkipped bool `json:"warmup_skipped,omitempty"`
}

// Fault makes a stage fail on purpose for its first Times attempts.
type Fault struct {
	Stage string `json:"stage"`
	Times int    `json:"times"`
}

// The stage records are the cluster package's: an allocation, the
// checkpoint staging report and the running server (Endpoint), with the
// JSON recorded in workflow histories.
type (
	Allocation       = cluster.Allocation
	CheckpointOutput = cluster.StageReport
	Endpoint         = cluster.Server
)

// servedModel is the model name requests to ep must carry.
func (p PointSpec) servedModel(ep *Endpoint) string {
	if ep != nil && ep.Model != "" {
		return ep.Model
	}
	return p.Model
}

// PerfSummary and EvalSummary are the point package's summaries.
type (
	PerfSummary = point.PerfSummary
	EvalSummary = point.EvalSummary
)

// ReuseRequest asks the ledger which durable stage outputs of a point can
// be reused from earlier sweeps.
type ReuseRequest struct {
	Point      PointSpec `json:"point"`
	Stages     []string  `json:"stages"`
	FromSweeps []string  `json:"from_sweeps"`
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
	Point    PointSpec  `json:"point"`
	Alloc    Allocation `json:"alloc"`
	Endpoint *Endpoint  `json:"endpoint,omitempty"`
	Mode     string     `json:"mode,omitempty"` // bring-up: perf | eval
}

// UploadInput carries the durable outputs of a point to the results store.
type UploadInput struct {
	Point PointSpec    `json:"point"`
	Perf  *PerfSummary `json:"perf,omitempty"`
	Eval  *EvalSummary `json:"eval,omitempty"`
	// PerfFrom and EvalFrom are set when the output was reused.
	PerfFrom *ReuseSource `json:"perf_from,omitempty"`
	EvalFrom *ReuseSource `json:"eval_from,omitempty"`
}

// PointRecord is the ledger row of a point's final state.
type PointRecord struct {
	Point       PointSpec     `json:"point"`
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
	Stage   string    `json:"stage"`
	Outcome string    `json:"outcome"`
	Rounds  int       `json:"rounds"`
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitempty"`
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
}
