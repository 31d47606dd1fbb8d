package workflows

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/point"
)

// seedPoints mirrors the seed GB200 sweep: node counts per point.
func seedPoints() []point.Spec {
	nodes := []struct {
		id    string
		nodes int
	}{{"agg_c1", 2}, {"agg_c4", 2}, {"dep8_c64", 6}, {"dep8_c128", 6}, {"dep16_c256", 12}, {"2p1d_c768", 16}, {"2p1d_c1024", 16}, {"2p1d_c1280", 16}}
	var out []point.Spec
	for i, n := range nodes {
		out = append(out, point.Spec{PointID: n.id, ConfigKey: "k", Nodes: n.nodes, Conc: i + 1, Topology: "t"})
	}
	return out
}

type interval struct {
	id         string
	nodes      int
	start, end time.Time
}

// runSweep runs the sweep with point workflows that sleep duration; setup
// may add mocks (e.g. search-attribute listeners) before it starts.
func runSweep(t *testing.T, in SweepInput, duration func(p point.Spec) time.Duration, setup ...func(*testsuite.TestWorkflowEnvironment)) ([]interval, *SweepProgress, *testsuite.TestWorkflowEnvironment) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	var spans []interval
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, pin PointInput) (*PointState, error) {
		start := workflow.Now(ctx)
		if err := workflow.Sleep(ctx, duration(pin.Point)); err != nil {
			return nil, err
		}
		spans = append(spans, interval{pin.Point.PointID, pin.Point.Nodes, start, workflow.Now(ctx)})
		return &PointState{PointID: pin.Point.PointID, Status: point.StatusCompleted}, nil
	})
	for _, f := range setup {
		f(env)
	}
	env.ExecuteWorkflow(SweepWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var pr SweepProgress
	require.NoError(t, env.GetWorkflowResult(&pr))
	return spans, &pr, env
}

// peak is the largest number of nodes held at once over the spans.
func peak(spans []interval) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, s.nodes}, ev{s.end, -s.nodes})
	}
	// Releases before acquisitions at the same instant.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

func TestSweepNodeBudget(t *testing.T) {
	tests := []struct {
		name     string
		duration func(p point.Spec) time.Duration
	}{
		{"equal durations", func(point.Spec) time.Duration { return time.Hour }},
		// Small points that keep finishing would starve a 16-node row under
		// plain backfilling; the bypass bound must prevent it.
		{"short small points", func(p point.Spec) time.Duration {
			if p.Nodes <= 6 {
				return 10 * time.Minute
			}
			return 2 * time.Hour
		}},
		{"long small points", func(p point.Spec) time.Duration {
			if p.Nodes <= 6 {
				return 5 * time.Hour
			}
			return 30 * time.Minute
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spans, pr, _ := runSweep(t, SweepInput{SweepID: "s", Name: "seed", TaskQueue: "q", NodeBudget: 18, Points: seedPoints()}, tc.duration)
			require.Len(t, spans, 8, "every point ran")
			require.LessOrEqual(t, peak(spans), 18, "never more nodes than the cluster has")
			require.LessOrEqual(t, pr.MaxInUse, 18)
			require.Equal(t, 8, pr.Counts[point.StatusCompleted])
			// The three 16-node rows ran, each alone among the large rows.
			var big []interval
			for _, s := range spans {
				if s.nodes == 16 {
					big = append(big, s)
				}
			}
			require.Len(t, big, 3)
		})
	}
}

func TestSweepStarvationBound(t *testing.T) {
	// One 16-node point behind a stream of 2-node points on 18 nodes: the
	// big one must start after at most MaxBypass small ones jumped it.
	points := []point.Spec{{PointID: "a", Nodes: 4, ConfigKey: "k"}, {PointID: "big", Nodes: 16, ConfigKey: "k"}}
	for i := range 10 {
		points = append(points, point.Spec{PointID: fmt.Sprintf("small%d", i), Nodes: 2, ConfigKey: "k"})
	}
	spans, _, _ := runSweep(t, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: points, MaxBypass: 2},
		func(p point.Spec) time.Duration { return time.Duration(p.Nodes) * time.Minute })
	require.LessOrEqual(t, peak(spans), 18)
	var bigStart time.Time
	for _, s := range spans {
		if s.id == "big" {
			bigStart = s.start
		}
	}
	startedBefore := 0
	for _, s := range spans {
		if s.start.Before(bigStart) && s.nodes == 2 {
			startedBefore++
		}
	}
	require.LessOrEqual(t, startedBefore, 2, "small points bypassed the big one more than MaxBypass times")
}

// instantPointsEnv is a sweep environment whose points complete at once.
func instantPointsEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(&PointState{Status: point.StatusCompleted}, nil)
	return env
}

func TestSweepRejectsOversizedPointAndContinuesAsNew(t *testing.T) {
	points := append(seedPoints(), point.Spec{PointID: "huge", Nodes: 40, ConfigKey: "k"})
	env := instantPointsEnv()
	// A small per-run budget forces a drain and continue-as-new that carries
	// the finished points and the rest of the queue.
	env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: points, PointsPerRun: 3})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can, "got %v", err)
	var next SweepInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Len(t, next.Done, 4, "3 points ran, the oversized one failed at once")
	require.Len(t, next.Points, 5)
	require.Equal(t, 1, next.Runs)
	for _, d := range next.Done {
		if d.PointID == "huge" {
			require.Equal(t, point.StatusFailed, d.Status)
			require.Contains(t, d.Error, "needs 40 nodes")
		}
	}
}

// TestSweepContinuesAsNewOnItsOwnHistoryBudget: a sweep run drains and
// continues as new at HistoryLimit events or historyBytesLimit bytes, not
// when the server suggests it (at 4 MiB, every ~500 points: each drain
// idles the node budget until the last running point ends).
func TestSweepContinuesAsNewOnItsOwnHistoryBudget(t *testing.T) {
	tests := []struct {
		name      string
		suggested bool
		size      int
		wantCAN   bool
	}{
		{name: "server suggests, history small", suggested: true, size: 4 << 20, wantCAN: false},
		{name: "history over the byte budget", size: historyBytesLimit + 1, wantCAN: true},
		{name: "neither", size: 1 << 20, wantCAN: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := instantPointsEnv()
			env.SetContinueAsNewSuggested(tc.suggested)
			env.SetCurrentHistorySize(tc.size)
			env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: seedPoints()})
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			var can *workflow.ContinueAsNewError
			if !tc.wantCAN {
				require.NoError(t, err)
				var pr SweepProgress
				require.NoError(t, env.GetWorkflowResult(&pr))
				require.Equal(t, 8, pr.Counts[point.StatusCompleted], "every point ran in one run")
				return
			}
			require.ErrorAs(t, err, &can, "got %v", err)
			var next SweepInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			require.NotEmpty(t, next.Done, "the drained run hands on its finished points")
			ids := map[string]bool{}
			for _, d := range next.Done {
				ids[d.PointID] = true
			}
			for _, p := range next.Points {
				ids[p.PointID] = true
			}
			require.Len(t, ids, 8, "every point finished or handed on, none lost")
			require.Equal(t, 8, len(next.Done)+len(next.Points), "none repeated")
		})
	}
}
