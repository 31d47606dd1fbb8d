package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// retriedPerf is a stage workflow of one Perf activity whose retry policy
// retries it.
func retriedPerf(ctx workflow.Context, in StageInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}})
	return workflow.ExecuteActivity(ctx, "Perf", in).Get(ctx, nil)
}

// TestAttemptLedgerRecordsRetriedAttempts: attempts a retry policy retries
// each get their row, through the SDK's interceptor chain: the injected
// failures with their type, message and last heartbeat, then the ok one.
func TestAttemptLedgerRecordsRetriedAttempts(t *testing.T) {
	a := newLedgerActs(t)
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&AttemptLedger{Store: a.Store, Worker: "7@login@cluster-x"}}})
	env.RegisterWorkflow(retriedPerf)
	env.RegisterActivityWithOptions(func(ctx context.Context, in StageInput) error {
		n := activity.GetInfo(ctx).Attempt
		activity.RecordHeartbeat(ctx, fmt.Sprintf("measuring, attempt %d", n))
		if n <= 2 {
			msg := fmt.Sprintf("injected fault in perf (%d of 2)", n)
			return temporal.NewApplicationError(msg, string(failure.ErrInjectedFault), failure.Failure{Class: failure.Injected, Excerpt: msg})
		}
		return nil
	}, activity.RegisterOptions{Name: "Perf"})
	env.ExecuteWorkflow(retriedPerf, StageInput{Point: point.Spec{SweepID: "sw", PointID: "c64"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	rows, err := a.Store.Attempts(context.Background(), "sw")
	require.NoError(t, err)
	require.Len(t, rows, 3, "one row per attempt: %+v", rows)
	for i, r := range rows {
		assert.Equal(t, i+1, r.Attempt)
		assert.Equal(t, "c64", r.PointID)
		assert.Equal(t, point.StagePerf, r.Stage)
		assert.Equal(t, "7@login@cluster-x", r.Worker)
		assert.Equal(t, fmt.Sprintf("%q", fmt.Sprintf("measuring, attempt %d", i+1)), r.Heartbeat, "attempt %d: its last heartbeat", i+1)
		assert.False(t, r.EndedAt.IsZero())
	}
	for _, r := range rows[:2] {
		assert.Equal(t, results.AttemptFailed, r.Outcome)
		assert.Equal(t, failure.Injected, r.Class)
		assert.Equal(t, string(failure.ErrInjectedFault), r.ErrorType)
		assert.Equal(t, fmt.Sprintf("injected fault in perf (%d of 2)", r.Attempt), r.Message)
	}
	assert.Equal(t, results.AttemptOK, rows[2].Outcome)
	assert.Empty(t, rows[2].Class)
}

// TestAttemptLedgerLostAttempts: an attempt whose worker died is marked
// lost by the next attempt, on a restarted worker, with the dead worker's
// identity and the heartbeat the server kept; a redelivered start or end
// after the restart writes no second row; the last attempt of a stage that
// never ended is closed by the point's final record (RecordPoint), and an
// open attempt of a stage whose next retry budget started is lost too.
func TestAttemptLedgerLostAttempts(t *testing.T) {
	a := newLedgerActs(t)
	ctx := context.Background()
	const wid, run = "default-test-workflow-id", "default-test-run-id"
	t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	att := func(stage, activityID string, n int, at time.Duration) results.StageAttempt {
		return results.StageAttempt{WorkflowID: wid, RunID: run, ActivityID: activityID, Attempt: n, SweepID: "sw", PointID: "c64",
			Stage: stage, StartedAt: t0.Add(at)}
	}
	before := &AttemptLedger{Store: a.Store, Worker: "101@login@q"}
	after := &AttemptLedger{Store: a.Store, Worker: "202@login@q"} // the restarted worker

	// Perf attempt 1 runs on the first worker, which is SIGKILLed.
	p1 := att(point.StagePerf, "11", 1, 0)
	p1.Worker = before.Worker
	before.begin(ctx, p1)
	// Attempt 2 of the same activity, on the restarted worker.
	p2 := att(point.StagePerf, "11", 2, 20*time.Second)
	p2.Worker = after.Worker
	after.begin(ctx, p2)
	after.begin(ctx, p2) // the task redelivered after a restart
	after.end(ctx, p2, nil, `"measured"`)
	after.end(ctx, p2, errors.New("late duplicate"), "") // a second end: the first stands

	// Eval: the last attempt of its budget is lost; the workflow saw the
	// heartbeat timeout, and the point ended without another attempt.
	e1 := att(point.StageEval, "21", 1, 40*time.Second)
	e1.Worker = after.Worker
	after.begin(ctx, e1)
	beats := &beatOutbound{l: after, a: &e1, last: evalProgress{Done: 12, Total: 200}, beat: true}
	beats.keep(ctx) // the progress it beat before its worker died
	beats.wait()
	// Warmup of another round: budget 1's open attempt, then budget 2.
	w1 := att(point.StageWarmup, "31", 1, 25*time.Second)
	after.begin(ctx, w1)
	w2 := att(point.StageWarmup, "32", 1, 35*time.Second)
	after.begin(ctx, w2)
	after.end(ctx, w2, nil, "")

	lostAt := t0.Add(50 * time.Second)
	rec := PointRecord{Point: point.Spec{SweepID: "sw", PointID: "c64", Identity: "id-c64"}, Status: point.StatusAborted, At: t0.Add(time.Hour),
		Stages: []point.StageRun{
			{Stage: point.StagePerf, Outcome: "ok", Rounds: 1, Started: t0, Ended: t0.Add(30 * time.Second)},
			{Stage: point.StageEval, Outcome: "aborted", Rounds: 1, Started: t0.Add(40 * time.Second), Ended: t0.Add(time.Hour),
				Failures: []failure.Attempt{{Failure: failure.Failure{Class: failure.LostWorker, Excerpt: "no heartbeat within the heartbeat timeout"}, At: lostAt}}},
		}}
	env := newActivityEnv(a)
	_, err := env.ExecuteActivity(a.RecordPoint, rec)
	require.NoError(t, err)
	_, err = env.ExecuteActivity(a.RecordPoint, rec) // retried record
	require.NoError(t, err)

	rows, err := a.Store.RunAttempts(ctx, wid, run)
	require.NoError(t, err)
	byKey := map[string]results.StageAttempt{}
	for _, r := range rows {
		byKey[fmt.Sprintf("%s#%d", r.ActivityID, r.Attempt)] = r
	}
	require.Len(t, rows, 5, "one row per attempt: %+v", rows)
	lost := byKey["11#1"]
	assert.Equal(t, results.AttemptLost, lost.Outcome)
	assert.Equal(t, failure.LostWorker, lost.Class)
	assert.Equal(t, "101@login@q", lost.Worker, "the dead worker's identity")
	assert.True(t, lost.EndedAt.Equal(p2.StartedAt), "lost until the next attempt started")
	assert.Contains(t, lost.Message, "101@login@q")
	ok := byKey["11#2"]
	assert.Equal(t, results.AttemptOK, ok.Outcome)
	assert.Equal(t, `"measured"`, ok.Heartbeat)
	ev := byKey["21#1"]
	assert.Equal(t, results.AttemptLost, ev.Outcome)
	assert.Equal(t, failure.LostWorker, ev.Class)
	assert.True(t, ev.EndedAt.Equal(lostAt), "ended when the workflow saw the timeout: %v", ev.EndedAt)
	assert.Contains(t, ev.Message, "final record")
	assert.Equal(t, `{"done":12,"total":200}`, ev.Heartbeat, "the progress the attempt left behind")
	assert.Equal(t, results.AttemptLost, byKey["31#1"].Outcome, "a new retry budget of the stage settles the old one's open attempt")
	assert.True(t, byKey["31#1"].EndedAt.Equal(w2.StartedAt))
	assert.Equal(t, results.AttemptOK, byKey["32#1"].Outcome)
}

// TestAttemptLedgerRelabelsUnseenResult: an attempt that ended ok but whose
// result never reached the server (a restarted server) is lost once the
// activity's next attempt starts.
func TestAttemptLedgerRelabelsUnseenResult(t *testing.T) {
	a := newLedgerActs(t)
	ctx := context.Background()
	l := &AttemptLedger{Store: a.Store, Worker: "w"}
	t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	b1 := results.StageAttempt{WorkflowID: "wf", RunID: "r", ActivityID: "5", Attempt: 1, SweepID: "sw", PointID: "p", Stage: point.StageBringUp, StartedAt: t0}
	l.begin(ctx, b1)
	l.end(ctx, b1, nil, "")
	b2 := b1
	b2.Attempt, b2.StartedAt = 2, t0.Add(15*time.Second)
	l.begin(ctx, b2)
	rows, err := a.Store.RunAttempts(ctx, "wf", "r")
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, results.AttemptLost, rows[0].Outcome)
	assert.Equal(t, failure.LostWorker, rows[0].Class)
	assert.Contains(t, rows[0].Message, "never reached the server")
}

// TestAttemptEndClasses: each way an attempt ends gets its outcome, class
// and evidence.
func TestAttemptEndClasses(t *testing.T) {
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	oom := classify(failure.Wrap(errors.New("prefill worker 0 exited with status 1"), failure.CUDAOOM,
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"))
	gate := temporal.NewApplicationError("perf figures refused: completed: 3 of 64 lanes finished a measured call", string(failure.ErrInvalidResult), nil)
	for _, tc := range []struct {
		name             string
		ctx              context.Context
		err              error
		outcome          string
		class            failure.Class
		errType, excerpt string
	}{
		{name: "ok", ctx: context.Background(), outcome: results.AttemptOK},
		{name: "retried failure", ctx: context.Background(), err: temporal.NewApplicationError("injected fault in perf (1 of 2)", string(failure.ErrInjectedFault)),
			outcome: results.AttemptFailed, class: failure.Injected, errType: string(failure.ErrInjectedFault), excerpt: "injected fault in perf (1 of 2)"},
		{name: "engine crash: the log tail's signature", ctx: context.Background(), err: oom,
			outcome: results.AttemptFailed, class: failure.CUDAOOM, errType: "Transient", excerpt: "torch.OutOfMemoryError: CUDA out of memory"},
		{name: "refused by the validity gate", ctx: context.Background(), err: gate,
			outcome: results.AttemptFailed, class: failure.InvalidResult, errType: string(failure.ErrInvalidResult), excerpt: "3 of 64 lanes"},
		{name: "cancelled by an operator", ctx: cancelled(temporal.NewCanceledError()), err: context.Canceled,
			outcome: results.AttemptCancelled, class: failure.OperatorCancel, errType: "Canceled", excerpt: "cancelled by the workflow"},
		{name: "heartbeat could not reach the server", ctx: cancelled(errors.New("rpc error: code = Unavailable desc = connection refused")), err: context.Canceled,
			outcome: results.AttemptLost, class: failure.LostWorker, errType: "Canceled", excerpt: "Unavailable"},
		{name: "start-to-close timeout", ctx: expired, err: context.DeadlineExceeded,
			outcome: results.AttemptFailed, class: failure.StageTimeout, errType: "DeadlineExceeded", excerpt: "start-to-close"},
		{name: "unclassified error", ctx: context.Background(), err: errors.New("dial tcp 10.0.0.3:8000: connection refused"),
			outcome: results.AttemptFailed, class: failure.Transient, excerpt: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a results.StageAttempt
			AttemptEnd(tc.ctx, &a, tc.err)
			assert.Equal(t, tc.outcome, a.Outcome)
			assert.Equal(t, tc.class, a.Class)
			if tc.errType != "" {
				assert.Equal(t, tc.errType, a.ErrorType)
			}
			assert.Contains(t, a.Excerpt, tc.excerpt)
		})
	}
}

// TestAttemptLedgerWorkerStop: an attempt that ends because its worker
// stops is lost, not cancelled by an operator.
func TestAttemptLedgerWorkerStop(t *testing.T) {
	a := newLedgerActs(t)
	env := newActivityEnv(a)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&AttemptLedger{Store: a.Store, Worker: "w"}}})
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	env.RegisterActivityWithOptions(func(ctx context.Context, in StageInput) error {
		close(stop)
		<-activity.GetWorkerStopChannel(ctx)
		return context.Canceled
	}, activity.RegisterOptions{Name: "Warmup"})
	_, err := env.ExecuteActivity("Warmup", StageInput{Point: point.Spec{SweepID: "sw", PointID: "p"}})
	require.Error(t, err)
	rows, err := a.Store.Attempts(context.Background(), "sw")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, results.AttemptLost, rows[0].Outcome)
	assert.Equal(t, failure.LostWorker, rows[0].Class)
	assert.Equal(t, "the worker stopped during the attempt", rows[0].Excerpt)
}

// TestStageActivitiesNameRegisteredActivities: every key of StageActivities
// is the registered name of an Activities method (the method's name), and
// every stage of a point has one. A misspelt key silently drops that
// stage's attempts from the ledger and from --sim-stage-time (seen: a
// rename turned "StageCheckpoint" into "point.StageCheckpoint").
func TestStageActivitiesNameRegisteredActivities(t *testing.T) {
	acts := reflect.TypeOf(&Activities{})
	stages := map[string]bool{}
	for name, stage := range StageActivities {
		_, ok := acts.MethodByName(name)
		assert.Truef(t, ok, "StageActivities key %q is no method of *Activities", name)
		stages[stage] = true
	}
	for _, s := range []string{point.StageAllocate, point.StageCheckpoint, point.StageBringUp, point.StageWarmup,
		point.StagePerf, point.StageEval, point.StageUpload, point.StageTeardown} {
		assert.Truef(t, stages[s], "stage %s has no activity in StageActivities", s)
	}
}
