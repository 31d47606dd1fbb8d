package activities_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

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
		policy := workflows.ActivityOptions(stage, "q", workflows.Tuning{}).RetryPolicy
		for _, tc := range tests {
			assert.Equal(t, tc.nonRetryable, slices.Contains(policy.NonRetryableErrorTypes, tc.errType), "stage %s, error type %s", stage, tc.errType)
		}
	}
}
