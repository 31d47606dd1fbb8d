package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// TestPowerSearchAttributes: once perf stored power figures, the point's
// Power and JoulesPerOutputToken attributes say so, riding on the stage
// upserts (no command of their own); a power-invalid point says invalid
// and sets no figure.
func TestPowerSearchAttributes(t *testing.T) {
	base := -1 // upserts of a point without power
	for _, tc := range []struct {
		power *energy.Figures
		want  string
		j     float64
	}{
		{nil, "", 0},
		{&energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, JoulesPerOutputToken: 1.25}, "simulated", 1.25},
		{&energy.Figures{Source: energy.SourceNVML, Valid: true, JoulesPerOutputToken: 0.5}, "valid", 0.5},
		{&energy.Figures{Source: energy.SourceDCGM, Reasons: []string{energy.ReasonGap}}, "invalid", 0},
	} {
		f := newFake()
		f.perfPower = tc.power
		env := pointEnv(t, f)
		var last string
		var lastJ float64
		upserts := 0
		env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
			upserts++
			sa := args.Get(0).(temporal.SearchAttributes)
			if v, ok := sa.GetKeyword(temporalx.SAPower); ok {
				last = v
			}
			if v, ok := sa.GetFloat64(temporalx.SAJoulesPerOutputToken); ok {
				lastJ = v
			}
		}).Return(nil)
		env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: fastTuning})
		require.True(t, env.IsWorkflowCompleted())
		require.NoError(t, env.GetWorkflowError())
		assert.Equal(t, tc.want, last)
		assert.Equal(t, tc.j, lastJ)
		if base < 0 {
			base = upserts
		}
		assert.Equal(t, base, upserts, "the same upserts as a point without power")
	}
}

// TestRequiredPowerGoesToOperatorGate: with --require-power the perf stage
// fails a power-invalid result as a non-retryable PowerInvalid with the
// figures as evidence; the point waits for the operator, and a retry that
// measures valid power completes it.
func TestRequiredPowerGoesToOperatorGate(t *testing.T) {
	f := newFake()
	f.failures[point.StagePerf] = 1
	f.errType[point.StagePerf] = activities.PowerInvalidType
	f.errDetails[point.StagePerf] = energy.Figures{Source: energy.SourceNVML, Reasons: []string{energy.ReasonGap}}
	f.perfPower = &energy.Figures{Source: energy.SourceNVML, Valid: true, JoulesPerOutputToken: 0.5}
	env := pointEnv(t, f)
	var atGate PointState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&atGate))
		env.UpdateWorkflow(UpdateDecide, "retry", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("retry rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, Decision{Action: ActionRetry})
	}, 10*time.Minute)
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: fastTuning})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st PointState
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, point.StatusAwaitingOperator, atGate.Status)
	assert.Equal(t, point.StagePerf, atGate.Stage)
	assert.Contains(t, atGate.LastError, "planted perf failure")
	assert.Equal(t, point.StatusCompleted, st.Status)
	require.NotNil(t, st.Perf)
	assert.True(t, st.Perf.Power.Valid)
	assert.Equal(t, 2, f.calls[point.StagePerf], "one refused attempt, one retried by the operator")
}
