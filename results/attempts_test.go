package results

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
)

// TestStageAttemptsOneRowEach: an attempt is one row from its start to its
// end; a redelivered start, a retried end and an end after another worker
// marked it lost change nothing; a relabel happens once.
func TestStageAttemptsOneRowEach(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
		a1 := StageAttempt{WorkflowID: "sw/p1", RunID: "r1", ActivityID: "11", Attempt: 1, SweepID: "sw", PointID: "p1",
			Stage: "perf", Worker: "101@login@cluster-x", StartedAt: t0}
		require.NoError(t, s.StartAttempt(ctx, a1))
		require.NoError(t, s.StartAttempt(ctx, a1)) // redelivered
		got, err := s.Attempts(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, AttemptRunning, got[0].Outcome)
		assert.True(t, got[0].EndedAt.IsZero())

		end := a1
		end.Outcome, end.Class, end.ErrorType = AttemptFailed, failure.Injected, "InjectedFault"
		end.Message, end.Excerpt, end.Heartbeat = "injected fault in perf (1 of 2)", "injected fault in perf (1 of 2)", `"measuring"`
		end.EndedAt = t0.Add(3 * time.Second)
		ok, err := s.EndAttempt(ctx, end)
		require.NoError(t, err)
		assert.True(t, ok)
		again := end
		again.Outcome, again.Class, again.EndedAt = AttemptLost, failure.LostWorker, t0.Add(9*time.Second)
		ok, err = s.EndAttempt(ctx, again) // a second closer: the first end stands
		require.NoError(t, err)
		assert.False(t, ok)
		got, err = s.Attempts(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, end.Outcome, got[0].Outcome)
		assert.Equal(t, end.Class, got[0].Class)
		assert.Equal(t, end.Heartbeat, got[0].Heartbeat)
		assert.Equal(t, "101@login@cluster-x", got[0].Worker)
		assert.True(t, got[0].EndedAt.Equal(end.EndedAt))

		// An end without a start row (its write failed) is the whole row; a
		// lost mark keeps the heartbeat the start row had.
		a2 := a1
		a2.Attempt, a2.StartedAt = 2, t0.Add(5*time.Second)
		a2.Outcome, a2.EndedAt = AttemptOK, t0.Add(8*time.Second)
		ok, err = s.EndAttempt(ctx, a2)
		require.NoError(t, err)
		assert.True(t, ok)
		// attempt 3 started: 2's result never reached the server.
		a2.Class, a2.ErrorType, a2.Message = failure.LostWorker, "Timeout", "its result never reached the server"
		changed, err := s.Relabel(ctx, a2)
		require.NoError(t, err)
		assert.True(t, changed)
		changed, err = s.Relabel(ctx, a2)
		require.NoError(t, err)
		assert.False(t, changed)

		runs, err := s.RunAttempts(ctx, "sw/p1", "r1")
		require.NoError(t, err)
		require.Len(t, runs, 2)
		assert.Equal(t, AttemptLost, runs[1].Outcome)
		assert.Equal(t, failure.LostWorker, runs[1].Class)

		failed, err := s.FailedAttempts(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, failed, 2)
		assert.Equal(t, 1, failed[0].Attempt)
		assert.Equal(t, 2, failed[1].Attempt)

		require.Error(t, s.StartAttempt(ctx, StageAttempt{WorkflowID: "x"}), "an attempt without its key is refused")
	})
}

// TestFailedAttemptsOfOlderLedgers: a sweep recorded before the attempt
// ledger lists its stage_failures rows as its failed attempts.
func TestFailedAttemptsOfOlderLedgers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
		oom := failure.Attempt{Failure: failure.Failure{Class: failure.CUDAOOM, Excerpt: "torch.OutOfMemoryError: CUDA out of memory"}, At: t0.Add(40 * time.Second)}
		require.NoError(t, s.PutStageRuns(ctx, "old", "p1", []StageRun{
			{Stage: "bringup", Outcome: "failed", Rounds: 1, StartedAt: t0, EndedAt: t0.Add(50 * time.Second), Failures: []failure.Attempt{oom}}}))
		got, err := s.FailedAttempts(ctx, "old")
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, failure.CUDAOOM, got[0].Class)
		assert.Equal(t, "bringup", got[0].Stage)
		assert.True(t, got[0].EndedAt.Equal(oom.At))
		assert.Zero(t, got[0].Attempt, "the old ledger does not know the attempt number")
	})
}
