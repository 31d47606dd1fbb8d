package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// TestFailureClassReachesStateAttributeAndLedger: a worker that died of a
// CUDA OOM (the class and line an activity attaches) puts the point at the
// operator gate; the class shows in the state, the FailureClass attribute
// and the ledger record, and stays there after the operator's retry works.
// A heartbeat timeout earlier in the same point is a lost worker.
func TestFailureClassReachesStateAttributeAndLedger(t *testing.T) {
	f := newFake()
	oom := failure.Failure{Class: failure.CUDAOOM, Excerpt: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}
	f.failures[point.StagePerf] = 1
	f.errType[point.StagePerf] = string(failure.ErrOutOfMemory)
	f.errDetails[point.StagePerf] = oom
	f.failures[point.StageWarmup] = 3
	f.errType[point.StageWarmup] = timeoutHeartbeat
	env := pointEnv(t, f)
	var classes []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		c, _ := sa.GetKeyword(temporalx.SAFailureClass)
		ps, _ := sa.GetKeyword(temporalx.SAPointStatus)
		classes = append(classes, ps+"/"+c)
	}).Return(nil)
	atGate, st := runRetriedAtGate(t, env)

	assert.Equal(t, point.StatusAwaitingOperator, atGate.Status)
	assert.Equal(t, string(failure.CUDAOOM), atGate.FailureClass)
	assert.Equal(t, oom.Excerpt, atGate.FailureExcerpt)
	assert.Equal(t, point.StatusCompleted, st.Status)
	assert.Equal(t, string(failure.CUDAOOM), st.FailureClass, "the latest failure stays after the retry worked")

	byStage := map[string]point.StageRun{}
	for _, r := range st.Stages {
		byStage[r.Stage] = r
	}
	warm := byStage[point.StageWarmup]
	require.Len(t, warm.Failures, 1, "one heartbeat-timed-out budget, then the automatic retry worked")
	assert.Equal(t, failure.LostWorker, warm.Failures[0].Class)
	perf := byStage[point.StagePerf]
	require.Len(t, perf.Failures, 1)
	assert.Equal(t, oom, perf.Failures[0].Failure)
	assert.False(t, perf.Failures[0].At.IsZero())

	assert.Contains(t, classes, point.StatusAwaitingOperator+"/"+string(failure.CUDAOOM))
	assert.Equal(t, point.StatusRunning+"/", classes[0], "a point that has not failed sets no FailureClass")

	require.Len(t, f.records, 1)
	var recorded []failure.Attempt
	for _, s := range f.records[0].Stages {
		recorded = append(recorded, s.Failures...)
	}
	require.Len(t, recorded, 2)
	assert.Equal(t, failure.LostWorker, recorded[0].Class)
	assert.Equal(t, failure.CUDAOOM, recorded[1].Class)
}

// TestFailureOfOlderErrors: errors without details (an older worker, the
// workflow's own types) get the class their type implies.
func TestFailureOfOlderErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want failure.Class
	}{
		{temporal.NewNonRetryableApplicationError("recipe moved", string(failure.ErrRecipeMismatch), nil), failure.ConfigError},
		{temporal.NewApplicationError("slurm job 9 is NODE_FAIL", "AllocationLost"), failure.JobLost},
		{temporal.NewApplicationError("invalid perf result: zero tokens", string(failure.ErrInvalidResult), point.PerfEvidence{}), failure.InvalidResult},
		{temporal.NewApplicationError("connection refused", "Transient"), failure.Transient},
		{temporal.NewNonRetryableApplicationError("x", string(failure.ErrBadConfig), nil,
			failure.Failure{Class: failure.SlurmTimeout, Excerpt: "slurm job 9 is TIMEOUT"}), failure.SlurmTimeout},
	} {
		assert.Equal(t, tc.want, FailureOf(tc.err).Class, "%v", tc.err)
	}
}
