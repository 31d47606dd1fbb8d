package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/point"
)

// bigPoints is a plan of n one-node points whose specs are ~2 KB each, as
// the planner's are (row JSON, recipe paths).
func bigPoints(n int) []point.Spec {
	out := make([]point.Spec, n)
	for i := range out {
		out[i] = point.Spec{PointID: fmt.Sprintf("k-disagg-c%05d", i), ConfigKey: "k", Topology: "disagg",
			Conc: i + 1, Nodes: 1, Row: json.RawMessage(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	}
	return out
}

// slimEnv runs one run of a stored-plan sweep: LoadPlanPage serves plan,
// every point completes with a state full of stage timings.
func slimEnv(t *testing.T, plan []point.Spec, in SweepInput) (*testsuite.TestWorkflowEnvironment, *[]activities.PlanPageRequest) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	var reqs []activities.PlanPageRequest
	env.OnActivity(a.LoadPlanPage, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.PlanPageRequest) (activities.PlanPage, error) {
		reqs = append(reqs, req)
		require.Equal(t, "stored", req.SweepID, "the plan is loaded from the sweep it names")
		lo := min(req.Offset, len(plan))
		return activities.PlanPage{Points: plan[lo:min(lo+req.Limit, len(plan))], Total: len(plan)}, nil
	})
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, pin PointInput) (*PointState, error) {
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return nil, err
		}
		st := &PointState{PointID: pin.Point.PointID, Status: point.StatusCompleted}
		for _, stage := range []string{"allocate", "checkpoint", "bring-up", "warmup", "perf", "upload", "teardown"} {
			st.Stages = append(st.Stages, point.StageRun{Stage: stage, Outcome: "ok", Started: workflow.Now(ctx), Ended: workflow.Now(ctx), Rounds: 1})
		}
		if pin.Point.Conc == 7 {
			st.Status = point.StatusFailed
			return st, errors.New("perf failed")
		}
		return st, nil
	})
	env.ExecuteWorkflow(SweepWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	return env, &reqs
}

// A sweep of a stored plan loads its points in pages, continues as new
// with slim outcomes and no point specs, and ends with a slim result.
func TestSweepStoredPlanSlimContinueAsNew(t *testing.T) {
	plan := bigPoints(1000)
	in := SweepInput{SweepID: "big", TaskQueue: "q", NodeBudget: 64, PlanRef: "stored", PointsPerRun: 600, Tuning: fastTuning}
	inputBytes, _ := json.Marshal(in)
	require.Less(t, len(inputBytes), 1024, "the start input does not grow with the plan")

	var runs []int
	for run := 0; ; run++ {
		require.Less(t, run, 5, "the sweep should finish in a few runs")
		env, reqs := slimEnv(t, plan, in)
		for _, r := range *reqs {
			assert.LessOrEqual(t, r.Limit, planPageSize)
		}
		runs = append(runs, len(*reqs))
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			var next SweepInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			data, _ := json.Marshal(next)
			// Slim: ~40 bytes per finished point, no specs, no states.
			assert.Less(t, len(data), 100*len(next.Done)+1024, "continue-as-new input is slim")
			assert.Empty(t, next.Points)
			assert.Equal(t, 1000, next.PlanTotal)
			for _, d := range next.Done {
				require.Nil(t, d.State, d.PointID)
				require.Empty(t, d.WorkflowID, "derivable: %s", d.PointID)
			}
			in = next
			continue
		}
		require.NoError(t, err)
		var res SweepProgress
		require.NoError(t, env.GetWorkflowResult(&res))
		assert.Equal(t, map[string]int{point.StatusCompleted: 999, point.StatusFailed: 1}, res.Counts)
		require.Len(t, res.Points, 1000)
		seen := map[string]bool{}
		for _, p := range res.Points {
			require.False(t, seen[p.PointID], "one row per point: %s", p.PointID)
			seen[p.PointID] = true
			if p.Status == point.StatusFailed {
				require.NotNil(t, p.Outcome)
				assert.Contains(t, p.Outcome.Error, "perf failed")
			} else {
				require.Nil(t, p.Outcome, p.PointID)
			}
		}
		data, _ := json.Marshal(res)
		assert.Less(t, len(data), 80*1000, "result is slim: %d bytes", len(data))
		// The query still gives every point and, for this run's, the state.
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		var pr SweepProgress
		require.NoError(t, v.Get(&pr))
		assert.Equal(t, res.Counts, pr.Counts)
		break
	}
	require.Len(t, runs, 2, "1,000 points at 600 per run: one continue-as-new")
	assert.Equal(t, 4, runs[0], "first run: the 3 pages of its 600 starts and one page queued ahead")
}

// A continue-as-new input with full outcomes (state) and point specs
// still decodes and finishes.
func TestSweepOldContinueAsNewInputStillRuns(t *testing.T) {
	old := `{"sweep_id":"old","name":"n","cluster":"c","task_queue":"q","node_budget":18,
	  "points":[{"point_id":"agg_c4","config_key":"k","topology":"t","conc":2,"nodes":2}],
	  "tuning":{"retry_interval":1000000000,"max_attempts":3},
	  "done":[{"point_id":"agg_c1","workflow_id":"old/agg_c1","status":"completed",
	    "state":{"point_id":"agg_c1","status":"completed","stage":"done","stages":[{"stage":"perf","outcome":"ok","rounds":1}]}}],
	  "started_at":"2026-11-30T10:00:00Z","runs":1}`
	var in SweepInput
	require.NoError(t, json.Unmarshal([]byte(old), &in))
	_, pr, env := runSweep(t, in, func(point.Spec) time.Duration { return time.Minute })
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, map[string]int{point.StatusCompleted: 2}, pr.Counts)
	assert.Len(t, pr.Points, 2)
}
