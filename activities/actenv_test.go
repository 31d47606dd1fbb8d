package activities

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/results"
)

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
