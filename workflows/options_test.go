package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// A worker killed mid-stage: the server notices a missed heartbeat within
// the heartbeat timeout, and the retry waits one retry interval. Both
// together stay under the 10 s the fault matrix asserts, for every long
// stage, with production options and with the demo/test tuning.
func TestActivityOptionsWorkerLossRecovery(t *testing.T) {
	const bound = 10 * time.Second
	tunings := []struct {
		name string
		t    Tuning
	}{
		{"production", Tuning{}},
		{"fast retries", Tuning{RetryInterval: time.Second, MaxAttempts: 3, HeartbeatTimeout: 10 * time.Second}},
		{"longer heartbeat asked", Tuning{HeartbeatTimeout: time.Hour}},
	}
	for _, tt := range tunings {
		for _, st := range point.Stages() {
			o := ActivityOptions(st.Name, "q", tt.t)
			if st.Name == point.StageTeardown {
				if tt.t.HeartbeatTimeout == 0 {
					assert.Equal(t, st.Heartbeat, o.HeartbeatTimeout, "teardown keeps its own timeout")
				}
				continue
			}
			assert.Positive(t, o.HeartbeatTimeout, "%s %s: a long stage must have a heartbeat timeout", tt.name, st.Name)
			assert.LessOrEqual(t, o.HeartbeatTimeout+o.RetryPolicy.InitialInterval, bound,
				"%s %s: heartbeat timeout %s + first retry %s", tt.name, st.Name, o.HeartbeatTimeout, o.RetryPolicy.InitialInterval)
		}
	}
	assert.Equal(t, 2*time.Second, ActivityOptions(point.StagePerf, "q", Tuning{HeartbeatTimeout: 2 * time.Second}).HeartbeatTimeout, "tuning shortens")
}

// TestRetryPolicyKnowsTheErrorTypes ties the activities' error types to the
// workflow's retry policies: the types activities fail with when no retry can
// help are listed as non-retryable for every stage, the retryable ones are not.
func TestRetryPolicyKnowsTheErrorTypes(t *testing.T) {
	tests := []struct {
		errType      string
		nonRetryable bool
	}{
		{string(failure.ErrBadConfig), true},
		{string(failure.ErrChecksumMismatch), true},
		{string(failure.ErrOutOfMemory), true},
		{string(failure.ErrResultConflict), true},
		{string(failure.ErrRecipeMismatch), true},
		{"Transient", false},
		{"AllocationLost", false},
		{"InjectedFault", false},
	}
	stages := []string{point.StageLedger}
	for _, s := range point.Stages() {
		stages = append(stages, s.Name)
	}
	for _, stage := range stages {
		policy := ActivityOptions(stage, "q", Tuning{}).RetryPolicy
		for _, tc := range tests {
			assert.Equal(t, tc.nonRetryable, slices.Contains(policy.NonRetryableErrorTypes, tc.errType), "stage %s, error type %s", stage, tc.errType)
		}
	}
}
