package activities

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/staging"
)

// TestActivityErrorClassification runs failing stages in the test activity
// environment and checks the application error type and retryability the
// workflow's retry policy sees. Real parts where cheap: the local backend
// and real staging for the allocation and checkpoint failures, the SQLite
// ledger for the conflict; a fake backend for server and network failures.
func TestActivityErrorClassification(t *testing.T) {
	ctx := context.Background()
	networkDown := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

	tests := []struct {
		name string
		// run sets up the activities and returns the activity and its input.
		run          func(t *testing.T) (*Activities, any, any)
		wantType     string
		nonRetryable bool
		wantClass    failure.Class
	}{
		{
			name: "bad config: the point needs more nodes than the pool has",
			run: func(t *testing.T) (*Activities, any, any) {
				r := newStagingRig(t)
				r.acts.Backend = r.local
				p := r.in.Point
				p.Nodes = 3
				return r.acts, r.acts.Allocate, p
			},
			wantType: string(failure.ErrBadConfig), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "bad config: the checkpoint is not on the shared filesystem",
			run: func(t *testing.T) (*Activities, any, any) {
				r := newStagingRig(t)
				r.acts.Backend = r.local
				r.in.Point.CheckpointSource = filepath.Join(t.TempDir(), "no-such-model")
				return r.acts, r.acts.StageCheckpoint, r.in
			},
			wantType: string(failure.ErrBadConfig), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "checksum mismatch: a source file no longer matches its manifest",
			run: func(t *testing.T) (*Activities, any, any) {
				r := newStagingRig(t)
				r.acts.Backend = r.local
				_, err := staging.LoadOrBuildSourceManifest(ctx, r.src) // cached beside the checkpoint
				require.NoError(t, err)
				f := filepath.Join(r.src, r.files[2])
				st, err := os.Stat(f)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(f, make([]byte, st.Size()), 0o644)) // same size, other bytes
				return r.acts, r.acts.StageCheckpoint, r.in
			},
			wantType: string(failure.ErrChecksumMismatch), nonRetryable: true, wantClass: failure.Checksum,
		},
		{
			name: "out of memory while the server loads",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{healthErr: fmt.Errorf("%w: CUDA OOM on gb200-03", cluster.ErrOOM)}, StateDir: t.TempDir()}
				return a, a.BringUp, StageInput{Point: point.Spec{SweepID: "s", PointID: "p"}, Alloc: cluster.Allocation{JobID: "j"}, Mode: "perf"}
			},
			wantType: string(failure.ErrOutOfMemory), nonRetryable: true, wantClass: failure.HostOOM,
		},
		{
			name: "bad config: the server command is wrong",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{bringUpErr: fmt.Errorf("%w: serve: executable not found", cluster.ErrBadConfig)}, StateDir: t.TempDir()}
				return a, a.BringUp, StageInput{Point: point.Spec{SweepID: "s", PointID: "p"}, Alloc: cluster.Allocation{JobID: "j"}, Mode: "perf"}
			},
			wantType: string(failure.ErrBadConfig), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "bad config: perf without an endpoint",
			run: func(t *testing.T) (*Activities, any, any) {
				a := newLedgerActs(t)
				return a, a.Perf, StageInput{Point: point.Spec{SweepID: "s", PointID: "p", Identity: "id"}}
			},
			wantType: string(failure.ErrBadConfig), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "bad config: eval without an endpoint",
			run: func(t *testing.T) (*Activities, any, any) {
				a := newLedgerActs(t)
				return a, a.Eval, StageInput{Point: point.Spec{SweepID: "s", PointID: "p", Identity: "id", Eval: true}}
			},
			wantType: string(failure.ErrBadConfig), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "result conflict: the ledger holds other figures for the point",
			run: func(t *testing.T) (*Activities, any, any) {
				a := newLedgerActs(t)
				in := uploadInput(400)
				require.NoError(t, a.Upload(ctx, in))
				return a, a.Upload, uploadInput(401)
			},
			wantType: string(failure.ErrResultConflict), nonRetryable: true, wantClass: failure.ConfigError,
		},
		{
			name: "transient: the scheduler is unreachable",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{allocErr: fmt.Errorf("sbatch: %w", networkDown)}, StateDir: t.TempDir()}
				return a, a.Allocate, point.Spec{SweepID: "s", PointID: "p", Nodes: 1}
			},
			wantType: "Transient", wantClass: failure.Transient,
		},
		{
			name: "transient: teardown cannot reach the node",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{teardownErr: fmt.Errorf("scancel: %w", networkDown)}, StateDir: t.TempDir()}
				return a, a.Teardown, StageInput{Alloc: cluster.Allocation{JobID: "j"}}
			},
			wantType: "Transient", wantClass: failure.Transient,
		},
		{
			name: "transient: staging loses its link to a node",
			run: func(t *testing.T) (*Activities, any, any) {
				r := newStagingRig(t)
				r.fake.stage = func(context.Context, cluster.Allocation, string, string, map[string][]string, func(cluster.StageProgress)) (cluster.StageReport, error) {
					return cluster.StageReport{}, fmt.Errorf("node n2: %w", networkDown)
				}
				return r.acts, r.acts.StageCheckpoint, r.in
			},
			wantType: "Transient", wantClass: failure.Transient,
		},
		{
			name: "allocation lost: a fresh allocation may succeed",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{healthErr: fmt.Errorf("%w: job 42 NODE_FAIL", cluster.ErrAllocationLost)}, StateDir: t.TempDir()}
				return a, a.BringUp, StageInput{Point: point.Spec{SweepID: "s", PointID: "p"}, Alloc: cluster.Allocation{JobID: "j"}, Mode: "eval"}
			},
			wantType: "AllocationLost", wantClass: failure.JobLost,
		},
		{
			name: "allocation lost with evidence: the backend's class and excerpt travel as details",
			run: func(t *testing.T) (*Activities, any, any) {
				lost := failure.Wrap(fmt.Errorf("%w: slurm job 42 is NODE_FAIL (NodeDown)", cluster.ErrAllocationLost), failure.NodeFail, "slurm job 42 is NODE_FAIL (NodeDown)")
				a := &Activities{Backend: &fakeBackend{healthErr: lost}, StateDir: t.TempDir()}
				return a, a.BringUp, StageInput{Point: point.Spec{SweepID: "s", PointID: "p"}, Alloc: cluster.Allocation{JobID: "j"}, Mode: "eval"}
			},
			wantType: "AllocationLost", wantClass: failure.NodeFail,
		},
		{
			name: "engine crash: a CUDA OOM signature from a worker's log is not retryable",
			run: func(t *testing.T) (*Activities, any, any) {
				oom := failure.Wrap(fmt.Errorf("%w: decode_w0 of slurm job 42 ran out of memory", cluster.ErrOOM), failure.CUDAOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
				a := &Activities{Backend: &fakeBackend{healthErr: oom}, StateDir: t.TempDir()}
				return a, a.BringUp, StageInput{Point: point.Spec{SweepID: "s", PointID: "p"}, Alloc: cluster.Allocation{JobID: "j"}, Mode: "perf"}
			},
			wantType: string(failure.ErrOutOfMemory), nonRetryable: true, wantClass: failure.CUDAOOM,
		},
		{
			name: "injected fault",
			run: func(t *testing.T) (*Activities, any, any) {
				a := &Activities{Backend: &fakeBackend{}, StateDir: t.TempDir()}
				return a, a.Allocate, point.Spec{SweepID: "s", PointID: "p", Nodes: 1, Faults: []point.Fault{{Stage: point.StageAllocate, Times: 1}}}
			},
			wantType: "InjectedFault", wantClass: failure.Injected,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, fn, in := tc.run(t)
			env := newActivityEnv(a)
			_, err := env.ExecuteActivity(fn, in)
			app := appError(t, err)
			assert.Equal(t, tc.wantType, app.Type(), "%v", err)
			assert.Equal(t, tc.nonRetryable, app.NonRetryable(), "%v", err)
			var f failure.Failure
			require.True(t, app.HasDetails(), "no failure details on %v", err)
			require.NoError(t, app.Details(&f))
			assert.Equal(t, tc.wantClass, f.Class, "%v", err)
			assert.NotEmpty(t, f.Excerpt)
		})
	}
}

// TestClassifyPassesCancellationThrough: a cancelled or timed-out stage is
// not an application error; Temporal reports it as a cancellation/timeout.
func TestClassifyPassesCancellationThrough(t *testing.T) {
	for _, err := range []error{context.Canceled, fmt.Errorf("staging: %w", context.DeadlineExceeded)} {
		assert.Same(t, err, classify(err))
	}
	assert.NoError(t, classify(nil))
}

// TestRecordPointKeepsFailedAttempts: the point record's failed attempts
// reach the ledger, one row each, through the RecordPoint activity.
func TestRecordPointKeepsFailedAttempts(t *testing.T) {
	a := newLedgerActs(t)
	at := time.Date(2026, 1, 12, 3, 14, 10, 0, time.UTC)
	nf := failure.Attempt{Failure: failure.Failure{Class: failure.NodeFail, Excerpt: "slurm job 42 is NODE_FAIL (NodeDown)"}, At: at}
	oom := failure.Attempt{Failure: failure.Failure{Class: failure.CUDAOOM, Excerpt: "torch.OutOfMemoryError: CUDA out of memory."}, At: at.Add(time.Minute)}
	rec := PointRecord{Point: point.Spec{SweepID: "s", PointID: "p", Identity: "id-c64"}, Status: "completed", At: at.Add(time.Hour),
		Stages: []point.StageRun{
			{Stage: point.StagePerf, Outcome: "allocation lost", Rounds: 1, Failures: []failure.Attempt{nf}, Started: at.Add(-time.Minute), Ended: at},
			{Stage: point.StageAllocate, Outcome: "ok", Rounds: 1, Started: at, Ended: at},
			{Stage: point.StageBringUp, Outcome: "ok", Rounds: 2, Failures: []failure.Attempt{oom}, Started: at, Ended: at.Add(2 * time.Minute)},
		}}
	env := newActivityEnv(a)
	_, err := env.ExecuteActivity(a.RecordPoint, rec)
	require.NoError(t, err)
	got, err := a.Store.StageFailures(context.Background(), "s")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, point.StagePerf, got[0].Stage)
	assert.Equal(t, 0, got[0].Seq)
	assert.Equal(t, nf.Failure, got[0].Failure)
	assert.Equal(t, point.StageBringUp, got[1].Stage)
	assert.Equal(t, 2, got[1].Seq)
	assert.Equal(t, oom.Failure, got[1].Failure)
	assert.True(t, oom.At.Equal(got[1].At))
}

// newActivityEnv returns a Temporal test activity environment with the
// activities of a registered; its logger is silent.
func newActivityEnv(a *Activities) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return env
}

// beats collects the heartbeat details an activity environment sends.
type beats[T any] struct {
	mu  sync.Mutex
	got []T
}

func listen[T any](t *testing.T, env *testsuite.TestActivityEnvironment) *beats[T] {
	b := &beats[T]{}
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var d T
		if err := details.Get(&d); err != nil {
			t.Errorf("heartbeat details: %v", err)
			return
		}
		b.mu.Lock()
		b.got = append(b.got, d)
		b.mu.Unlock()
	})
	return b
}

func (b *beats[T]) all() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]T(nil), b.got...)
}

// appError unwraps the application error an activity failed with.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app, "activities fail with application errors the retry policy can classify")
	return app
}

// fakeBackend is a cluster backend without processes: each method returns
// its configured error; point.StageCheckpoint delegates to stage (a real local
// backend in the staging tests) and records the resume lists it was given.
type fakeBackend struct {
	allocErr, bringUpErr, healthErr, checkErr, teardownErr error
	stage                                                  func(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error)

	mu       sync.Mutex
	resumes  []map[string][]string
	allocs   int // Allocate calls
	lastReq  cluster.AllocRequest
	bringUps int // BringUp calls
}

var _ cluster.Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Allocate(_ context.Context, req cluster.AllocRequest) (cluster.Allocation, error) {
	f.mu.Lock()
	f.allocs++
	f.lastReq = req
	f.mu.Unlock()
	if f.allocErr != nil {
		return cluster.Allocation{}, f.allocErr
	}
	nodes := make([]string, max(req.Nodes, 1))
	for i := range nodes {
		nodes[i] = "fake-" + string(rune('a'+i))
	}
	return cluster.Allocation{JobID: req.SweepID + "." + req.PointID, Nodes: nodes}, nil
}

func (f *fakeBackend) StageCheckpoint(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
	f.mu.Lock()
	f.resumes = append(f.resumes, resume)
	f.mu.Unlock()
	if f.stage == nil {
		return cluster.StageReport{Nodes: len(alloc.Nodes)}, nil
	}
	return f.stage(ctx, alloc, src, dst, resume, progress)
}

func (f *fakeBackend) lastResume() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.resumes) == 0 {
		return nil
	}
	return f.resumes[len(f.resumes)-1]
}

func (f *fakeBackend) BringUp(context.Context, cluster.Allocation, cluster.ServeSpec) (cluster.Server, error) {
	f.mu.Lock()
	f.bringUps++
	f.mu.Unlock()
	if f.bringUpErr != nil {
		return cluster.Server{}, f.bringUpErr
	}
	return cluster.Server{URL: "http://127.0.0.1:1", Handle: "fake"}, nil
}

func (f *fakeBackend) Health(context.Context, cluster.Allocation, cluster.Server) (string, error) {
	if f.healthErr != nil {
		return "loading weights", f.healthErr
	}
	return "ready", nil
}

func (f *fakeBackend) Check(context.Context, cluster.Allocation) error { return f.checkErr }

func (f *fakeBackend) Teardown(context.Context, cluster.Allocation) error { return f.teardownErr }

// newLedgerActs: activities on a fresh ledger and artifact store.
func newLedgerActs(t *testing.T) *Activities {
	dir := t.TempDir()
	store, err := results.Open(context.Background(), filepath.Join(dir, "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	arts, err := artifacts.Open(filepath.Join(dir, "artifacts"))
	require.NoError(t, err)
	return &Activities{Store: store, Artifacts: arts, StateDir: filepath.Join(dir, "state")}
}
