package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/point"
)

// TestPointReallocatesWhenTheAllocationIsLost: a stage failing with
// AllocationLost (node failure, preemption, external scancel) tears the lost
// allocation down and starts again on fresh nodes, keeping the stages that
// finished; past maxReallocations the loss goes to the operator gate.
func TestPointReallocatesWhenTheAllocationIsLost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stage      string
		times      int
		decision   string
		wantStatus string
		wantCalls  map[string]int
	}{
		{
			name: "node lost during perf", stage: point.StagePerf, times: 1, wantStatus: point.StatusCompleted,
			wantCalls: map[string]int{point.StageAllocate: 2, point.StageCheckpoint: 2, "bringup:perf": 2,
				point.StagePerf: 2, point.StageEval: 1, point.StageTeardown: 2, point.StageUpload: 1},
		},
		{
			name: "job cancelled during eval keeps the perf result", stage: point.StageEval, times: 1, wantStatus: point.StatusCompleted,
			wantCalls: map[string]int{point.StageAllocate: 2, "bringup:perf": 1, point.StagePerf: 1,
				"bringup:eval": 2, point.StageEval: 2, point.StageTeardown: 2, point.StageUpload: 1},
		},
		{
			name: "lost on every allocation: the operator gate after the last re-allocation", stage: point.StageWarmup, times: -1,
			decision: ActionAbort, wantStatus: point.StatusAborted,
			wantCalls: map[string]int{point.StageAllocate: maxReallocations + 1, point.StageWarmup: maxReallocations + 1,
				point.StagePerf: 0, point.StageTeardown: maxReallocations + 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.failures[tc.stage] = tc.times
			f.errType[tc.stage] = "AllocationLost"
			env := pointEnv(t, f)
			if tc.decision != "" {
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow(UpdateDecide, "op", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("decision rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, Decision{Action: tc.decision})
				}, time.Hour/2)
			}
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(true), TaskQueue: "q", Tuning: fastTuning})
			require.True(t, env.IsWorkflowCompleted())
			var st PointState
			if tc.decision == "" {
				require.NoError(t, env.GetWorkflowError())
				require.NoError(t, env.GetWorkflowResult(&st))
				require.Equal(t, tc.wantStatus, st.Status)
				outcomes := map[point.Outcome]bool{}
				for _, s := range st.Stages {
					outcomes[s.Outcome] = true
				}
				require.True(t, outcomes["allocation lost"], "%+v", st.Stages)
			} else {
				require.Error(t, env.GetWorkflowError())
				require.Equal(t, 1, f.count("record:"+tc.wantStatus))
			}
			for stage, n := range tc.wantCalls {
				require.Equal(t, n, f.count(stage), "calls of %s", stage)
			}
		})
	}
}
