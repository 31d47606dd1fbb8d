package activities

import (
	"time"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
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
	Perf      *point.PerfSummary `json:"perf,omitempty"`
	PerfSweep string             `json:"perf_sweep,omitempty"`
	PerfRun   string             `json:"perf_run,omitempty"`
	Eval      *point.EvalSummary `json:"eval,omitempty"`
	EvalSweep string             `json:"eval_sweep,omitempty"`
	EvalRun   string             `json:"eval_run,omitempty"`
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
	Point    point.Spec         `json:"point"`
	Alloc    cluster.Allocation `json:"alloc"`
	Endpoint *cluster.Server    `json:"endpoint,omitempty"`
	Mode     string             `json:"mode,omitempty"` // bring-up: perf | eval
}

// UploadInput carries the durable outputs of a point to the results store.
type UploadInput struct {
	Point point.Spec         `json:"point"`
	Perf  *point.PerfSummary `json:"perf,omitempty"`
	Eval  *point.EvalSummary `json:"eval,omitempty"`
	// PerfFrom and EvalFrom are set when the output was reused.
	PerfFrom *ReuseSource `json:"perf_from,omitempty"`
	EvalFrom *ReuseSource `json:"eval_from,omitempty"`
}

// PointRecord is the ledger row of a point's final state.
type PointRecord struct {
	Point       point.Spec       `json:"point"`
	Status      string           `json:"status"`
	FailedStage string           `json:"failed_stage,omitempty"`
	Error       string           `json:"error,omitempty"`
	Stages      []point.StageRun `json:"stages,omitempty"`
	// At is the workflow time of the record, so a late retry of an older
	// record cannot roll the point back.
	At time.Time `json:"at"`
}

// FinalStatus is the point's final status, what metrics counts finished
// points by.
func (r PointRecord) FinalStatus() string { return r.Status }

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
func servedModel(p point.Spec, ep *cluster.Server) string {
	if ep != nil && ep.Model != "" {
		return ep.Model
	}
	return p.Model
}
