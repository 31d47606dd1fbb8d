package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/noop"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// orderClock gives the seed sweep's stages times that make every point
// end at its own minute (perf by concurrency), so the order of points is
// the sweep's, not a tie broken by chance.
type orderClock struct{}

var orderPerf = map[int]time.Duration{1: 38, 4: 80, 64: 53, 128: 71, 256: 37, 768: 23, 1024: 29, 1280: 19}

func (orderClock) Duration(c forecast.Call) time.Duration {
	switch c.Kind {
	case forecast.KindBringUp:
		if c.Activity == "BringUp" {
			return 10 * time.Minute
		}
	case forecast.KindEvalRestart:
		return 8 * time.Minute
	case forecast.KindWarmup:
		return 2 * time.Minute
	case forecast.KindPerf:
		return orderPerf[c.Point.Conc] * time.Minute
	case forecast.KindEval:
		return 5 * time.Minute
	}
	return 0
}

// timedStages are the stage activities of a real sweep on the no-op
// backend (as `starter bench orchestration` runs it), each taking the
// clock's time, scaled: one forecast minute is scale of wall time.
type timedStages struct {
	*activities.Activities
	clock    forecast.Clock
	scale    time.Duration
	mu       sync.Mutex
	finished []string
	at       []time.Time
}

func (s *timedStages) take(ctx context.Context, name string, arg any) error {
	c, _ := runner.Classify(name, arg)
	d := time.Duration(float64(s.clock.Duration(c)) / float64(time.Minute) * float64(s.scale))
	// Heartbeat as the real stages do: a stage longer than the worker-loss
	// heartbeat timeout (5 s) would otherwise be retried.
	return temporalx.HoldBeating(ctx, d)
}

func (s *timedStages) Allocate(ctx context.Context, p point.Spec) (cluster.Allocation, error) {
	if err := s.take(ctx, "Allocate", p); err != nil {
		return cluster.Allocation{}, err
	}
	return s.Activities.Allocate(ctx, p)
}

func (s *timedStages) BringUp(ctx context.Context, in activities.StageInput) (cluster.Server, error) {
	if err := s.take(ctx, "BringUp", in); err != nil {
		return cluster.Server{}, err
	}
	return s.Activities.BringUp(ctx, in)
}

// CheckServer asks the backend whether the handed-over allocation is held;
// the no-op server has no metrics to wait on for idleness.
func (s *timedStages) CheckServer(ctx context.Context, in activities.StageInput) (activities.ServerCheck, error) {
	if err := s.Backend.Check(ctx, in.Alloc); err != nil {
		return activities.ServerCheck{Reason: err.Error()}, nil
	}
	return activities.ServerCheck{AllocationAlive: true, ServerAlive: in.Endpoint != nil}, nil
}

func (s *timedStages) Warmup(ctx context.Context, in activities.StageInput) error {
	return s.take(ctx, "Warmup", in)
}

func (s *timedStages) Perf(ctx context.Context, in activities.StageInput) (point.PerfSummary, error) {
	return point.PerfSummary{Simulated: true}, s.take(ctx, "Perf", in)
}

func (s *timedStages) Eval(ctx context.Context, in activities.StageInput) (point.EvalSummary, error) {
	return point.EvalSummary{Passed: true, Simulated: true}, s.take(ctx, "Eval", in)
}

func (s *timedStages) Upload(context.Context, activities.UploadInput) error      { return nil }
func (s *timedStages) RecordSweep(context.Context, activities.SweepRecord) error { return nil }

// RecordPoint is a point's last activity: the order of these calls is the
// order in which the points end.
func (s *timedStages) RecordPoint(_ context.Context, rec activities.PointRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.finished, rec.Point.PointID) {
		s.finished = append(s.finished, rec.Point.PointID)
		s.at = append(s.at, time.Now())
	}
	return nil
}

// TestForecastOrderIsTheSweepsOrder runs the seed sweep twice with the
// same stage times: forecast in virtual time, and for real on the dev
// server (no-op backend, a forecast minute is 60 ms). Both end the points
// in the same order. Each activity's scheduling latency on a loaded CI host
// (tens of ms) is a forecast minute or more, and a long deployment chain
// gathers more of it: CI once saw c1280 end 14 minutes after c4 where the
// forecast had it 15 before (real/forecast 1.68 against 1.34). So points
// whose order a chain could swap end at least 1.4x apart: c1 after c768
// (perf 38), c4 after c1280 (perf 80).
func TestForecastOrderIsTheSweepsOrder(t *testing.T) {
	e := newITEnv(t)
	in, _, err := control.Build(control.Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml",
		ID: "forecast-order", Tuning: workflows.Tuning{RetryInterval: 200 * time.Millisecond, MaxAttempts: 2, HeartbeatTimeout: 5 * time.Second}})
	require.NoError(t, err)
	for i := range in.Points {
		in.Points[i].CheckpointSource = "" // nothing to stage on the no-op backend
	}

	tl, err := runner.Simulate(*in, orderClock{})
	require.NoError(t, err)
	// The forecast's order, with the points' end times far enough apart
	// that the real sweep's latency cannot swap two: 5 forecast minutes
	// (300 ms) and 8% of the later one.
	var ends []forecast.Event
	for _, ev := range tl.Events {
		if ev.Activity == "RecordPoint" {
			ends = append(ends, ev)
		}
	}
	require.Len(t, ends, len(in.Points))
	sort.SliceStable(ends, func(i, j int) bool { return ends[i].End.Before(ends[j].End) })
	var want []string
	for i, ev := range ends {
		if i > 0 {
			gap := max(5*time.Minute, ev.End.Sub(tl.Start)*8/100)
			require.GreaterOrEqual(t, ev.End.Sub(ends[i-1].End), gap, "points %s and %s end too close to order them for real", ends[i-1].Point.PointID, ev.Point.PointID)
		}
		want = append(want, ev.Point.PointID)
	}
	require.Equal(t, tl.Finished, want, "the sweep saw its children end in the order they recorded")

	queue := "forecast-order"
	state := t.TempDir()
	stages := &timedStages{clock: orderClock{}, scale: 60 * time.Millisecond, Activities: &activities.Activities{Backend: noop.New(), GPUsPerNode: 4,
		Simulated: true, Engine: "noop", StateDir: state, HealthInterval: 10 * time.Millisecond, Logger: zap.NewNop()}}
	w := worker.New(e.c, queue, worker.Options{})
	workflows.Register(w)
	w.RegisterActivity(stages)
	require.NoError(t, w.Start())
	defer w.Stop()
	in.TaskQueue = queue
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.SweepID, TaskQueue: queue}, workflows.SweepWorkflow, *in)
	require.NoError(t, err)
	var res workflows.SweepProgress
	require.NoError(t, run.Get(ctx, &res))
	for i, ev := range ends {
		real := "-"
		if j := slices.Index(stages.finished, ev.Point.PointID); j >= 0 {
			real = fmt.Sprintf("%.1f", float64(stages.at[j].Sub(res.StartedAt))/float64(stages.scale))
		}
		t.Logf("%d. c%d ends at forecast minute %.0f, real %s", i+1, ev.Point.Conc, ev.End.Sub(tl.Start).Minutes(), real)
	}
	require.Equal(t, map[string]int{point.StatusCompleted: len(in.Points)}, res.Counts)
	require.Equal(t, want, stages.finished, "forecast and real sweep end the points in the same order")
	t.Logf("makespan: forecast %s, real %s (%s per forecast minute)", tl.End.Sub(tl.Start), res.FinishedAt.Sub(res.StartedAt), stages.scale)
}
