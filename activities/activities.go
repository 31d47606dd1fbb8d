// Package activities holds the Temporal activities of a sweep point. Each is a
// thin adapter: it heartbeats, classifies errors for the retry policy, and
// calls the plain packages (cluster backends, loadgen, gsm8k, results,
// artifacts) that do the work and are tested on their own.
package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/nodehealth"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// EvalConfig sets how the GSM8K stage runs.
type EvalConfig struct {
	TestPath     string // GSM8K test split (path or URL)
	TrainPath    string // train split, for few-shot exemplars
	CacheDir     string
	Mode         gsm8k.Mode
	Limit        int // 0 = all 1319 questions
	Concurrency  int // 0 = the point's concurrency, as InferenceX does
	Thresholds   *gsm8k.Thresholds
	DefaultFloor float64
}

// PerfConfig sets how the perf and warmup stages drive the server.
type PerfConfig struct {
	// Duration caps an agentic perf run (InferenceX: 3600 s); demos shorten it.
	Duration time.Duration
	// TimeScale scales trace delays (1 = real time).
	TimeScale float64
	// Trace is the AgentX workload agentic points replay (nil: the default
	// generated trace); TraceName names it in measurement profiles.
	Trace     []loadgen.Trace
	TraceName string
	// WarmupPerLane is the warmup calls per lane before an agentic
	// measurement (0: 1, InferenceX's fast mode; InferenceX full runs: 10).
	WarmupPerLane int
	Seed          int64
}

// Activities carries the dependencies of every stage.
type Activities struct {
	Backend   cluster.Backend
	Store     *results.Store
	Artifacts artifacts.Store
	GSM8K     EvalConfig
	Load      PerfConfig
	// Idle says how a server handed over between points of one deployment
	// is judged idle before the next point measures on it.
	Idle        IdleWait
	GPUsPerNode int
	// Simulated says the backend serves sweepflow's simulator, not a real
	// engine; Engine names what serves ("simulator", "srtctl"). Both are
	// part of every stored output's measurement profile.
	Simulated bool
	Engine    string
	// Power says how perf measures GPU power (the source follows the
	// backend: the simulator's model, nvidia-smi, the telemetry stage).
	Power PowerConfig
	// PerfClient is what drives perf: "benchmark" runs the recipe's own
	// benchmark process on the cluster (the backend must be a
	// cluster.Benchmarker) and reads its result file; "" or "loadgen" runs
	// sweepflow's load generator from the worker.
	PerfClient string
	// Containers is the cluster profile's container remapping; it is part
	// of every stored output's measurement profile.
	Containers map[string]string
	// StateDir keeps small per-point files (fault counters).
	StateDir string
	// RecipesRoot is the cluster profile's recipes root: a point's recipe
	// is read from there, and only when its bytes match the point identity
	// (verifyRecipe). RequireRecipes refuses a recipe when it is empty.
	RecipesRoot    string
	RequireRecipes bool
	HealthInterval time.Duration
	// Cluster is the profile's name: node faults are charged to its nodes
	// and its excluded nodes kept out of allocations under BadNodes
	// (package nodehealth). "" turns bad-node tracking off.
	Cluster  string
	BadNodes nodehealth.Policy
	Logger   *zap.Logger
}

func (a *Activities) log(ctx context.Context) *zap.Logger { return ContextLogger(ctx, a.Logger) }

// ContextLogger is l (or a no-op logger) with the running activity's type,
// attempt and workflow, so every activity's lines say where they come from.
func ContextLogger(ctx context.Context, l *zap.Logger) *zap.Logger {
	if l == nil {
		l = zap.NewNop()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With(zap.String("activity", info.ActivityType.Name), zap.Int32("attempt", info.Attempt),
			zap.String("workflow", info.WorkflowExecution.ID))
	}
	return l
}

// classify turns backend and package errors into Temporal application errors
// whose type the retry policy understands. Each carries its failure class and
// evidence as details (failure.Failure), which the point workflow reads.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	t, f := errorType(err), backendFailure(err)
	if t.Final() {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(t), err, f)
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), string(t), err, f)
}

// errorType is the application error type of a backend's or package's
// error, from its sentinel.
func errorType(err error) failure.ErrorType {
	switch {
	case errors.Is(err, cluster.ErrBadConfig):
		return failure.ErrBadConfig
	case errors.Is(err, cluster.ErrChecksum):
		return failure.ErrChecksumMismatch
	case errors.Is(err, cluster.ErrOOM):
		return failure.ErrOutOfMemory
	case errors.Is(err, results.ErrConflict):
		return failure.ErrResultConflict
	case errors.Is(err, cluster.ErrAllocationLost):
		return failure.ErrAllocationLost
	}
	return failure.ErrTransient
}

// backendFailure is a backend error's failure: the one the backend attached
// from its evidence, else the class its error type implies (failure's
// table), with the message as the excerpt.
func backendFailure(err error) failure.Failure {
	if f, ok := failure.Of(err); ok {
		return f
	}
	return failure.Failure{Class: errorType(err).Class(), Excerpt: failure.Clip(err.Error())}
}

// heartbeater records the latest details every interval until stopped, so
// long stages prove liveness and see cancellation.
//
// The first beat goes out after one interval, not at the start: the server
// keeps the previous attempt's details for a resumed attempt, and every
// beat is a write of the workflow's state on the server (3.5 a point in
// `starter bench orchestration` when each stage beat at its start and end).
// The heartbeat timeout counts from the attempt's start, and the interval
// is a fifth of it.
//
// Finish records the latest details once more when the attempt failed and
// they changed since the last beat: the SDK sends them with the failure, so
// a retry resumes from all the progress the attempt made, not from its last
// periodic beat. A successful attempt's result supersedes its details.
type heartbeater struct {
	ctx     context.Context // nil outside an activity
	mu      sync.Mutex
	details any
	version int // bumped by set
	sent    int // version of the last recorded details
	stop    chan struct{}
	done    chan struct{}
}

func startHeartbeat(ctx context.Context, every time.Duration, initial any) *heartbeater {
	h := &heartbeater{details: initial, stop: make(chan struct{}), done: make(chan struct{})}
	if !activity.IsActivity(ctx) {
		close(h.done)
		return h
	}
	h.ctx = ctx
	if every <= 0 {
		every = heartbeatEvery(ctx)
	}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			h.record()
		}
	}()
	return h
}

// record sends the latest details: every tick, changed or not, since a beat
// is also the proof of liveness.
func (h *heartbeater) record() {
	h.mu.Lock()
	d := h.details
	h.sent = h.version
	h.mu.Unlock()
	activity.RecordHeartbeat(h.ctx, d)
}

func (h *heartbeater) set(d any) {
	h.mu.Lock()
	h.details = d
	h.version++
	h.mu.Unlock()
}

// Stop ends the beats without a last one (a successful attempt, or one
// whose error carries no progress worth keeping).
func (h *heartbeater) Stop() { h.Finish(nil) }

// Finish ends the beats; after a failed attempt (*errp != nil) it records
// the details once more if they changed since the last beat. Use it as
// `defer hb.Finish(&err)` with a named error result.
func (h *heartbeater) Finish(errp *error) {
	select {
	case <-h.stop:
		return
	default:
		close(h.stop)
	}
	<-h.done
	if h.ctx == nil || errp == nil || *errp == nil {
		return
	}
	h.mu.Lock()
	changed := h.sent != h.version
	h.mu.Unlock()
	if changed {
		h.record()
	}
}

// heartbeatEvery picks a beat well inside the stage's heartbeat timeout.
func heartbeatEvery(ctx context.Context) time.Duration {
	if activity.IsActivity(ctx) {
		if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
			// A fifth: a beat every second at the long stages' 5 s timeout,
			// which the worker's heartbeat throttle (1 s) lets through.
			return max(hb/5, 100*time.Millisecond)
		}
	}
	return 10 * time.Second
}

// injectFault fails a stage on purpose for the first f.Times attempts of the
// point (counted across operator retries in a file under StateDir). Chaos
// faults are the stage's own to carry out (chaosFault).
func (a *Activities) injectFault(p point.Spec, stage string) error {
	for _, f := range p.Faults {
		if f.Stage != stage || f.Times <= 0 || f.Chaos != "" {
			continue
		}
		n, err := a.countAttempt(p, stage, "")
		if err != nil {
			return err
		}
		if n <= f.Times {
			msg := fmt.Sprintf("injected fault in %s (%d of %d)", stage, n, f.Times)
			return temporal.NewApplicationError(msg, string(failure.ErrInjectedFault), failure.Failure{Class: failure.Injected, Excerpt: msg})
		}
	}
	return nil
}

// chaosFault is the chaos fault (point.Fault.Chaos) this attempt of the
// stage carries out, "" when none is due: each is due for the stage's
// first Times attempts of the point.
func (a *Activities) chaosFault(p point.Spec, stage string) (string, error) {
	for _, f := range p.Faults {
		if f.Stage != stage || f.Times <= 0 || f.Chaos == "" {
			continue
		}
		n, err := a.countAttempt(p, stage, ".chaos")
		if err != nil {
			return "", err
		}
		if n <= f.Times {
			return f.Chaos, nil
		}
	}
	return "", nil
}

// countAttempt counts one more attempt of the point's stage in a file under
// StateDir (suffix keeps separate counts) and returns the count.
func (a *Activities) countAttempt(p point.Spec, stage, suffix string) (int, error) {
	dir := filepath.Join(a.StateDir, "faults")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	path := filepath.Join(dir, sanitize(p.SweepID)+"."+sanitize(p.PointID)+"."+stage+suffix)
	n := 0
	if b, err := os.ReadFile(path); err == nil {
		n, _ = strconv.Atoi(string(b))
	}
	n++
	return n, os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644)
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == '/' || c == ' ' || c == ':' {
			out[i] = '_'
		}
	}
	return string(out)
}
