package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
)

// groupFake stands in for the cluster activities of a whole sweep: it holds
// allocations like a cluster (so the test sees every node held at once),
// runs one server per allocation, and returns perf figures that depend on
// the point's concurrency, so a figure landing on the wrong point shows.
type groupFake struct {
	mu      sync.Mutex
	calls   map[string]int
	order   []string
	held    map[string]int // job -> nodes
	peak    int
	jobs    int
	servers map[string]string // job -> mode of its running server
	byJob   map[string][]string
	// dead makes the server of the allocation that point ID receives die
	// before that point probes it; lost makes its allocation vanish.
	dead, lost map[string]bool
	// allocated lists the points that asked for nodes, in order; faults
	// counts the attempts of each point's injected faults (point.Fault, as
	// the real activities honour them).
	allocated []string
	faults    map[string]int
	// model, when set, gives a point's figures (adaptive searches read
	// them); the fake's own figure stays in OutputTputPerGPU.
	model func(p point.Spec) point.PerfSummary
}

func newGroupFake() *groupFake {
	return &groupFake{calls: map[string]int{}, held: map[string]int{}, servers: map[string]string{}, byJob: map[string][]string{},
		dead: map[string]bool{}, lost: map[string]bool{}, faults: map[string]int{}}
}

func (f *groupFake) note(job, key string) {
	f.calls[key]++
	f.order = append(f.order, key)
	f.byJob[job] = append(f.byJob[job], key)
}

func (f *groupFake) nodesHeld() int {
	n := 0
	for _, v := range f.held {
		n += v
	}
	return n
}

// inject fails a stage of p for the first Times attempts of each of its
// faults, with the real activities' error type (InjectedFault).
func (f *groupFake) inject(p point.Spec, stage string) error {
	for _, ft := range p.Faults {
		if ft.Stage != stage {
			continue
		}
		key := p.PointID + "/" + stage
		f.faults[key]++
		if f.faults[key] <= ft.Times {
			return temporal.NewApplicationError(fmt.Sprintf("injected fault in %s (%d of %d)", stage, f.faults[key], ft.Times), "InjectedFault")
		}
	}
	return nil
}

// tput is the fake's figure for a concurrency.
func tput(conc int) float64 { return 1000 + float64(conc) }

func (f *groupFake) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(func(ctx context.Context, p point.Spec) (cluster.Allocation, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.allocated = append(f.allocated, p.PointID)
		if err := f.inject(p, point.StageAllocate); err != nil {
			return cluster.Allocation{}, err
		}
		f.jobs++
		job := fmt.Sprintf("job%d", f.jobs)
		f.held[job] = p.Nodes
		f.peak = max(f.peak, f.nodesHeld())
		f.note(job, "allocate")
		return cluster.Allocation{JobID: job, Nodes: make([]string, p.Nodes)}, nil
	})
	env.OnActivity(a.StageCheckpoint, mock.Anything, mock.Anything).Return(cluster.StageReport{}, nil)
	env.OnActivity(a.CheckServer, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StageInput) (activities.ServerCheck, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.note(in.Alloc.JobID, "probe")
		if f.lost[in.Point.PointID] {
			delete(f.held, in.Alloc.JobID)
			delete(f.servers, in.Alloc.JobID)
			return activities.ServerCheck{Reason: "job gone"}, nil
		}
		if f.dead[in.Point.PointID] {
			delete(f.servers, in.Alloc.JobID)
		}
		_, up := f.servers[in.Alloc.JobID]
		return activities.ServerCheck{AllocationAlive: true, ServerAlive: up}, nil
	})
	env.OnActivity(a.BringUp, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StageInput) (cluster.Server, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.held[in.Alloc.JobID]; !ok {
			return cluster.Server{}, fmt.Errorf("bring-up on %s, which holds no nodes", in.Alloc.JobID)
		}
		f.servers[in.Alloc.JobID] = in.Mode
		f.note(in.Alloc.JobID, "bringup:"+in.Mode)
		return cluster.Server{URL: "http://" + in.Alloc.JobID, Mode: in.Mode, JobID: in.Alloc.JobID}, nil
	})
	env.OnActivity(a.Warmup, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Perf, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StageInput) (point.PerfSummary, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.servers[in.Endpoint.JobID] != "perf" {
			return point.PerfSummary{}, fmt.Errorf("perf of %s on a %q server", in.Point.PointID, f.servers[in.Endpoint.JobID])
		}
		f.note(in.Alloc.JobID, "perf:"+in.Point.PointID)
		var sum point.PerfSummary
		if f.model != nil {
			sum = f.model(in.Point)
		}
		sum.Requests, sum.OutputTputPerGPU, sum.Simulated = in.Point.Conc, tput(in.Point.Conc), true
		return sum, nil
	})
	env.OnActivity(a.Eval, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StageInput) (point.EvalSummary, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.servers[in.Endpoint.JobID] != "eval" {
			return point.EvalSummary{}, fmt.Errorf("eval of %s on a %q server", in.Point.PointID, f.servers[in.Endpoint.JobID])
		}
		f.note(in.Alloc.JobID, "eval:"+in.Point.PointID)
		return point.EvalSummary{EMStrict: 0.95, Passed: true}, nil
	})
	env.OnActivity(a.Upload, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Teardown, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StageInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.held, in.Alloc.JobID)
		delete(f.servers, in.Alloc.JobID)
		f.note(in.Alloc.JobID, "teardown")
		return nil
	})
	env.OnActivity(a.RecordPoint, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
}

// seedGroupPoints is the seed sweep as the planner gives it: six
// deployments, the 2P1D one with three concurrencies (eval at c1280).
func seedGroupPoints() []point.Spec {
	type pt struct {
		dep   string
		nodes int
		conc  int
		eval  bool
	}
	var out []point.Spec
	for _, x := range []pt{{"agg1", 2, 1, false}, {"agg4", 2, 4, false}, {"dep8a", 6, 64, true}, {"dep8b", 6, 128, true},
		{"dep16", 12, 256, true}, {"twop1d", 16, 768, false}, {"twop1d", 16, 1024, false}, {"twop1d", 16, 1280, true}} {
		out = append(out, point.Spec{PointID: fmt.Sprintf("%s_c%d", x.dep, x.conc), ConfigKey: "k", Topology: x.dep,
			Conc: x.conc, Nodes: x.nodes, Eval: x.eval, SyntheticAL: 3.77, Identity: fmt.Sprintf("%s-c%d", x.dep, x.conc)})
	}
	return out
}

func runGroupSweep(t *testing.T, f *groupFake, pts []point.Spec) *SweepProgress {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	env.RegisterWorkflow(DeploymentWorkflow)
	f.register(env)
	env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: pts, Tuning: fastTuning})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	return finalProgress(t, env)
}

// finalProgress is a finished sweep's progress query: its rows carry every
// point's final state (the sweep's result keeps only IDs and statuses).
func finalProgress(t *testing.T, env *testsuite.TestWorkflowEnvironment) *SweepProgress {
	t.Helper()
	var res SweepProgress
	require.NoError(t, env.GetWorkflowResult(&res))
	v, err := env.QueryWorkflow(QueryProgress)
	require.NoError(t, err)
	var pr SweepProgress
	require.NoError(t, v.Get(&pr))
	require.Equal(t, res.Counts, pr.Counts, "result and query agree on the counts")
	require.Len(t, res.Points, len(pr.Points), "the result has a row per point")
	for _, p := range res.Points {
		require.False(t, p.Outcome != nil && p.Outcome.State != nil, "slim result: %s carries no point state", p.PointID)
	}
	return &pr
}

func TestSweepSharesOneBringUpPerDeployment(t *testing.T) {
	f := newGroupFake()
	pr := runGroupSweep(t, f, seedGroupPoints())
	require.Equal(t, 8, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Equal(t, 6, f.calls["allocate"], "one allocation per deployment")
	require.Equal(t, 6, f.calls["bringup:perf"], "6 perf bring-ups for 8 points")
	require.Equal(t, 4, f.calls["bringup:eval"], "one eval restart per deployment with evals")
	require.Equal(t, 6, f.calls["teardown"])
	require.Empty(t, f.held, "every allocation released")
	require.LessOrEqual(t, f.peak, 18, "the 2P1D deployment holds its 16 nodes once")
	require.LessOrEqual(t, pr.MaxInUse, 18)

	// The 2P1D deployment: three perf runs on one server, then one eval
	// restart, the eval, the teardown.
	var seq []string
	for _, evs := range f.byJob {
		if indexOf(evs, "perf:twop1d_c768") >= 0 {
			seq = evs
		}
	}
	require.Equal(t, []string{"allocate", "bringup:perf", "perf:twop1d_c768", "probe", "perf:twop1d_c1024", "probe", "perf:twop1d_c1280",
		"bringup:eval", "eval:twop1d_c1280", "teardown"}, seq)

	// Each point keeps its own workflow, status and figures.
	for _, p := range pr.Points {
		require.NotNil(t, p.Outcome, p.PointID)
		require.Equal(t, PointWorkflowID("s", p.PointID), p.WorkflowID)
		st := p.Outcome.State
		require.NotNil(t, st, p.PointID)
		require.NotNil(t, st.Perf, p.PointID)
		require.Equal(t, p.Conc, st.Perf.Requests, "%s got another concurrency's figures", p.PointID)
		require.Equal(t, tput(p.Conc), st.Perf.OutputTputPerGPU, p.PointID)
		if p.PointID == "twop1d_c768" || p.PointID == "twop1d_c1024" {
			require.NotNil(t, st.Handoff, "%s handed its server to the next point", p.PointID)
		} else {
			require.Nil(t, st.Handoff, "%s: the last user of an allocation tears it down", p.PointID)
		}
	}
	c1024 := stagesOf(pr, "twop1d_c1024")
	require.Contains(t, c1024, "allocate:shared")
	require.Contains(t, c1024, "bringup:shared")
	require.NotContains(t, c1024, "teardown:ok")
}

func TestDeploymentDefersEvalsUntilEveryPerfRan(t *testing.T) {
	// Two evals in one deployment: both run after all three perf runs, on
	// one eval-mode restart.
	pts := []point.Spec{}
	for i, c := range []int{8, 16, 32} {
		pts = append(pts, point.Spec{PointID: fmt.Sprintf("p_c%d", c), ConfigKey: "k", Conc: c, Nodes: 6,
			Eval: i != 1, SyntheticAL: 3.77, Identity: fmt.Sprintf("dep-c%d", c)})
	}
	f := newGroupFake()
	pr := runGroupSweep(t, f, pts)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Equal(t, []string{"allocate", "bringup:perf", "perf:p_c16", "probe", "perf:p_c8", "probe", "perf:p_c32",
		"bringup:eval", "eval:p_c32", "probe", "eval:p_c8", "teardown"}, f.order)
	for _, p := range pr.Points {
		require.NotNil(t, p.Outcome.State.Perf, p.PointID)
		require.Equal(t, tput(p.Conc), p.Outcome.State.Perf.OutputTputPerGPU, p.PointID)
		require.Equal(t, p.PointID != "p_c16", p.Outcome.State.Eval != nil, p.PointID)
	}
}

func TestDeploymentRecoversFromADeadServerOrLostNodes(t *testing.T) {
	tests := []struct {
		name                   string
		dead, lost             string
		allocs, perfUps, downs int
	}{
		{name: "server died between points", dead: "twop1d_c1024", allocs: 1, perfUps: 2, downs: 1},
		{name: "allocation lost between points", lost: "twop1d_c1024", allocs: 2, perfUps: 2, downs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newGroupFake()
			if tc.dead != "" {
				f.dead[tc.dead] = true
			}
			if tc.lost != "" {
				f.lost[tc.lost] = true
			}
			pr := runGroupSweep(t, f, seedGroupPoints()[5:])
			require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
			require.Equal(t, tc.allocs, f.calls["allocate"])
			require.Equal(t, tc.perfUps, f.calls["bringup:perf"], "the bring-up again is counted")
			require.Equal(t, 1, f.calls["bringup:eval"])
			require.Equal(t, tc.downs, f.calls["teardown"])
			require.Empty(t, f.held)
			for _, p := range pr.Points {
				require.Equal(t, tput(p.Conc), p.Outcome.State.Perf.OutputTputPerGPU, p.PointID)
			}
		})
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func stagesOf(pr *SweepProgress, id string) []string {
	var out []string
	for _, p := range pr.Points {
		if p.PointID == id && p.Outcome != nil && p.Outcome.State != nil {
			for _, s := range p.Outcome.State.Stages {
				out = append(out, s.Stage+":"+string(s.Outcome))
			}
		}
	}
	return out
}

// TestEvalOnlyPointsSkipPerf: points of an evals-only changelog entry come
// up in eval mode and run their eval alone (no warmup, no perf), complete
// without a perf figure, and share a deployment's server without an
// eval-mode restart; a perf deployment next to them runs as before.
func TestEvalOnlyPointsSkipPerf(t *testing.T) {
	evalOnly := func(id, identity string, conc int) point.Spec {
		return point.Spec{PointID: id, ConfigKey: "k", Conc: conc, Nodes: 6, Eval: true, Identity: identity,
			Profile: point.Profile{Eval: true, EvalOnly: true}}
	}
	pts := []point.Spec{
		{PointID: "perf_c64", ConfigKey: "k", Conc: 64, Nodes: 6, Eval: true, SyntheticAL: 3.77, Identity: "perf-c64", Profile: point.Profile{Eval: true}},
		evalOnly("eo_c64", "eo-c64", 64),
		evalOnly("eo2_c16", "eo2-c16", 16),
		evalOnly("eo2_c32", "eo2-c32", 32),
	}
	f := newGroupFake()
	pr := runGroupSweep(t, f, pts)
	require.Equal(t, 4, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Equal(t, 1, f.calls["perf:perf_c64"])
	require.Zero(t, f.calls["perf:eo_c64"]+f.calls["perf:eo2_c16"]+f.calls["perf:eo2_c32"], "eval-only points run no perf")
	require.Equal(t, 1, f.calls["bringup:perf"], "only the perf point brings a server up for perf")
	require.Equal(t, 3, f.calls["bringup:eval"], "one eval restart for the perf point, one eval bring-up per eval-only deployment")
	require.Equal(t, 3, f.calls["allocate"])
	require.Empty(t, f.held)
	for _, p := range pr.Points {
		st := p.Outcome.State
		require.NotNil(t, st.Eval, p.PointID)
		require.Empty(t, st.Missing, p.PointID)
		require.Equal(t, p.PointID != "perf_c64", p.EvalOnly, p.PointID)
		if p.EvalOnly {
			require.Nil(t, st.Perf, p.PointID)
			require.NotContains(t, stagesOf(pr, p.PointID), "warmup:ok", p.PointID)
		}
	}
	// The two eval-only points of one deployment share its eval server.
	var seq []string
	for _, evs := range f.byJob {
		if indexOf(evs, "eval:eo2_c16") >= 0 {
			seq = evs
		}
	}
	require.Equal(t, []string{"allocate", "bringup:eval", "eval:eo2_c16", "probe", "eval:eo2_c32", "teardown"}, seq)
}

// TestDeploymentDropsAStalePerfDone reproduces a deferred point whose
// completion the group takes before its perf-done signal (both ready at
// once: the point handed the server over, then ended, e.g. cancelled). The
// signal then arrives while the next point runs perf. The group must not
// take it for that point's hand-over: the third point would start on a
// server still in use. The stale lease is torn down instead.
func TestDeploymentDropsAStalePerfDone(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(DeploymentWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	var mu sync.Mutex
	var torn []string
	env.OnActivity(a.Teardown, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StageInput) error {
		mu.Lock()
		defer mu.Unlock()
		torn = append(torn, in.Alloc.JobID)
		return nil
	})
	type start struct {
		at    time.Duration
		lease string // the point that handed the server over ("": none)
	}
	starts := map[string]start{}
	t0 := env.Now()
	lease := func(job, from string) *Lease {
		return &Lease{Alloc: cluster.Allocation{JobID: job}, Endpoint: &cluster.Server{URL: "http://" + job}, From: from}
	}
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in PointInput) (*PointState, error) {
		id := in.Point.PointID
		st := start{at: workflow.Now(ctx).Sub(t0)}
		if in.Deployment.Lease != nil {
			st.lease = in.Deployment.Lease.From
		}
		mu.Lock()
		starts[id] = st
		mu.Unlock()
		switch id {
		case "p_a":
			// Ends at once without handing over (its perf-done comes later).
			return &PointState{PointID: id, Status: point.StatusCancelled}, nil
		case "p_b":
			// 10 minutes of perf on the server, then hand it over and
			// wait for the eval turn.
			_ = workflow.Sleep(ctx, 10*time.Minute)
			_ = workflow.SignalExternalWorkflow(ctx, in.Deployment.Workflow, "", SignalPerfDone, PerfDone{PointID: id, Lease: lease("job-b", id)}).Get(ctx, nil)
			var turn EvalTurn
			workflow.GetSignalChannel(ctx, SignalEvalTurn).ReceiveWithTimeout(ctx, time.Hour, &turn)
			return &PointState{PointID: id, Status: point.StatusCompleted}, nil
		}
		return &PointState{PointID: id, Status: point.StatusCompleted}, nil
	})
	// p_a's perf-done, late: while p_b runs perf.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPerfDone, PerfDone{PointID: "p_a", Lease: lease("job-a", "p_a")})
	}, time.Minute)
	var pts []point.Spec
	for _, id := range []string{"p_a", "p_b", "p_c"} {
		pts = append(pts, point.Spec{PointID: id, ConfigKey: "k", Conc: 8, Nodes: 6, Eval: true, Identity: "dep-" + id})
	}
	env.ExecuteWorkflow(DeploymentWorkflow, DeploymentInput{SweepID: "s", Key: "dep", Points: pts, TaskQueue: "q", Tuning: fastTuning})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.GreaterOrEqual(t, starts["p_c"].at, 10*time.Minute, "p_c started while p_b still ran perf on the server")
	require.Equal(t, "p_b", starts["p_c"].lease, "p_c runs on the server p_b handed over")
	require.Contains(t, torn, "job-a", "the stale hand-over is released")
}
