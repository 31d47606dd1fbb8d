// Package cluster defines the backend interface through which sweepflow
// holds nodes, stages checkpoints, starts inference servers and releases them.
// Implementations: cluster/local (child processes on the worker's host) and
// cluster/slurm.
package cluster

import (
	"context"
	"errors"
	"time"
)

// AllocRequest asks for nodes for one sweep point.
type AllocRequest struct {
	SweepID   string
	PointID   string
	Nodes     int
	TimeLimit time.Duration
	// RecipePath is the point's recipe (root-relative CONFIG_FILE path); the
	// Slurm backend reads its time limit and role layout from it.
	RecipePath string
	// RecipeDigest is the sha256 of the recipe bytes the point was planned
	// from; a backend that reads the recipe refuses a file without them.
	RecipeDigest string
	// RecipeSets are the point's --set overrides (point.Spec.RecipeSets).
	RecipeSets []string
	// Exclude are nodes the allocation must not get (package nodehealth's
	// excluded nodes); a backend without node names ignores it.
	Exclude []string
	// Status is called with a human line while the request waits (e.g. the
	// Slurm pending reason); the activity heartbeats it.
	Status func(string)
}

// Allocation is a set of nodes held for one point. Its JSON is the
// allocate activity's output recorded in point workflow histories.
type Allocation struct {
	JobID   string   `json:"job_id"`
	Nodes   []string `json:"nodes"`
	WorkDir string   `json:"work_dir"`
	// Backend names the backend that allocated it; the allocate activity
	// sets it, backends leave it empty.
	Backend string `json:"backend"`
}

// StageProgress reports checkpoint staging across nodes.
type StageProgress struct {
	Node        string
	Done        []string
	BytesCopied int64
}

// StageReport is the outcome of checkpoint staging across nodes.
// Its JSON is the checkpoint activity's output recorded in histories.
type StageReport struct {
	Nodes        int    `json:"nodes"`
	FilesCopied  int    `json:"files_copied"`
	FilesSkipped int    `json:"files_skipped"`
	BytesCopied  int64  `json:"bytes_copied"`
	BytesSkipped int64  `json:"bytes_skipped"`
	Manifest     string `json:"manifest_sha256"`
}

// ServeSpec describes the server to start on an allocation.
type ServeSpec struct {
	Model string
	// CheckpointPath is the node-local checkpoint the engine loads
	// (point.Spec.CheckpointPath; empty when the point stages none).
	CheckpointPath string
	Layout         string // the topology in the simulator's shorthand, e.g. "2P1D DEP16/DEP32"
	RowJSON        []byte // the InferenceX matrix row
	RecipePath     string
	RecipeDigest   string   // see AllocRequest.RecipeDigest
	RecipeSets     []string // see AllocRequest.RecipeSets
	// Image is the matrix row's image (point.Spec.Image): the container of
	// a recipe whose model.container the profile binds to the row's image.
	Image       string
	GPUsPerNode int
	// Env is added to the serving processes' environment (e.g. synthetic
	// acceptance for perf runs only).
	Env map[string]string
	// SyntheticAL > 0 launches the throughput (perf) set: InferenceX's
	// golden-AL rewrite of the recipe; 0 launches the recipe as it is (eval).
	SyntheticAL float64
	// HealthBudget > 0 cuts the recipe's health-check budget to it (a chaos
	// run's bring-up hang on a simulated cluster; never a real engine's).
	HealthBudget time.Duration
}

// BenchmarkSpec is one perf run of the recipe's own benchmark process, with
// the environment InferenceX's workflow gives it.
type BenchmarkSpec struct {
	RecipePath   string
	RecipeDigest string   // see AllocRequest.RecipeDigest
	RecipeSets   []string // see AllocRequest.RecipeSets
	// Env: CONC, DURATION, MODEL, RESULT_FILENAME, ... (names and values as
	// InferenceX's benchmark-multinode template exports them).
	Env map[string]string
	// ResultFilename is the per-point result file's base name
	// (RESULT_FILENAME; the script writes <base>_conc<N>.json).
	ResultFilename string
	Conc           int
	Status         func(string)
}

// Benchmarker is a backend that can run the recipe's benchmark process
// against a brought-up server. It returns the result JSON's path.
type Benchmarker interface {
	RunBenchmark(ctx context.Context, alloc Allocation, srv Server, spec BenchmarkSpec) (string, error)
}

// Server is a started inference server. Its JSON is the bring-up
// activity's output recorded in histories.
type Server struct {
	URL string `json:"url"`
	// Mode (perf | eval) is the environment it was started with, and JobID
	// the allocation it runs on; the bring-up activity sets both.
	Mode  string `json:"mode"`
	JobID string `json:"job_id"`
	// Handle identifies the serving processes for the backend (pid, step id).
	Handle string `json:"handle"`
	// Model is the name the server serves, when the backend knows it ("":
	// the row's model). A TensorRT-LLM worker serves its checkpoint
	// directory's name, so clients must ask for this one, not InferenceX's
	// model id.
	Model string `json:"model,omitempty"`
}

// Backend is one kind of cluster. Every method is idempotent: activities are
// retried, and a retry after a crash must not double-allocate or double-start.
type Backend interface {
	Name() string
	Allocate(ctx context.Context, req AllocRequest) (Allocation, error)
	// StageCheckpoint copies src (shared filesystem) to dst (node-local) on
	// every allocated node, resuming per node from the files already done.
	// progress may be called from several goroutines at once.
	StageCheckpoint(ctx context.Context, alloc Allocation, src, dst string, resume map[string][]string, progress func(StageProgress)) (StageReport, error)
	BringUp(ctx context.Context, alloc Allocation, spec ServeSpec) (Server, error)
	// Health returns nil when the server answers; phase is a human marker
	// from the server log (loading weights, capturing graphs, ready).
	Health(ctx context.Context, alloc Allocation, srv Server) (phase string, err error)
	// Check reports whether the allocation is still alive (job state).
	Check(ctx context.Context, alloc Allocation) error
	Teardown(ctx context.Context, alloc Allocation) error
}

// Error classes a backend returns; activities map them to Temporal error types.
var (
	// ErrBadConfig: no retry can fix it (missing checkpoint, bad command).
	ErrBadConfig = errors.New("bad configuration")
	// ErrChecksum: a source file does not match its manifest.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrOOM: the job ran out of memory; retrying the same config won't help.
	ErrOOM = errors.New("out of memory")
	// ErrAllocationLost: node failure, preemption, external cancel; a fresh
	// allocation may succeed.
	ErrAllocationLost = errors.New("allocation lost")
)
