package workers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

func perfStage(context.Context) (string, error)   { return "measured", nil }
func recordSweep(context.Context) (string, error) { return "recorded", nil }

func TestSimStageTimeHoldsStagesOnly(t *testing.T) {
	const d = 600 * time.Millisecond
	tests := []struct {
		name string
		act  string
		fn   func(context.Context) (string, error)
		min  time.Duration
		max  time.Duration
	}{
		{"a stage lasts at least the stage time", "Perf", perfStage, d, 10 * time.Second},
		{"bookkeeping is not held", "RecordSweep", recordSweep, 0, d / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&simStageTime{d: d}}})
			env.RegisterActivityWithOptions(tc.fn, activity.RegisterOptions{Name: tc.act})
			env.SetHeartbeatDetails("resume-here")
			t0 := time.Now()
			v, err := env.ExecuteActivity(tc.act)
			took := time.Since(t0)
			require.NoError(t, err)
			var out string
			require.NoError(t, v.Get(&out))
			assert.NotEmpty(t, out)
			assert.GreaterOrEqual(t, took, tc.min)
			assert.Less(t, took, tc.max)
		})
	}
}
