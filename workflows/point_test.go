package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// fakeStages is a stateful stand-in for the cluster activities: each stage
// can be told to fail a number of times, and every call is counted.
type fakeStages struct {
	mu       sync.Mutex
	failures map[string]int // stage -> failures left (-1: always)
	errType  map[string]string
	// errDetails are the planted application error's details (a
	// failure.Failure, as activities.classify attaches one).
	errDetails map[string]any
	// records are the ledger records the point wrote.
	records []activities.PointRecord
	calls   map[string]int
	order   []string
	block   map[string]bool // stage blocks until its context ends
	// after: how long a stage takes on the workflow clock (the testsuite
	// skips it), set before pointEnv.
	after    map[string]time.Duration
	evalPass bool
	// perfIns and uploads are the inputs the perf and upload stages got.
	perfIns []activities.StageInput
	// perfPower is the power figures perf returns (nil: none).
	perfPower *energy.Figures
	uploads   []activities.UploadInput
}

func newFake() *fakeStages {
	return &fakeStages{failures: map[string]int{}, errType: map[string]string{}, errDetails: map[string]any{}, calls: map[string]int{}, block: map[string]bool{}, after: map[string]time.Duration{}, evalPass: true}
}

func (f *fakeStages) hit(ctx context.Context, stage string) error {
	f.mu.Lock()
	f.calls[stage]++
	f.order = append(f.order, stage)
	left := f.failures[stage]
	if left > 0 {
		f.failures[stage] = left - 1
	}
	block := f.block[stage]
	typ := f.errType[stage]
	details := f.errDetails[stage]
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if left != 0 {
		if typ == timeoutHeartbeat {
			return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
		}
		if typ != "" && details != nil {
			return temporal.NewNonRetryableApplicationError("planted "+stage+" failure", typ, nil, details)
		}
		if typ != "" {
			return temporal.NewNonRetryableApplicationError("planted "+stage+" failure", typ, nil)
		}
		return errors.New("planted transient " + stage + " failure")
	}
	return nil
}

// timeoutHeartbeat as an errType makes the stage's failures heartbeat
// timeouts, as the server reports a lost worker.
const timeoutHeartbeat = "heartbeat timeout"

// wait is the stage's duration for AfterFn.
func (f *fakeStages) wait(stage string) func() time.Duration {
	return func() time.Duration {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.after[stage]
	}
}

func (f *fakeStages) count(stage string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[stage]
}

func (f *fakeStages) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageAllocate)).Return(func(ctx context.Context, p point.Spec) (cluster.Allocation, error) {
		return cluster.Allocation{JobID: "job-" + p.PointID, Nodes: make([]string, p.Nodes)}, f.hit(ctx, point.StageAllocate)
	})
	env.OnActivity(a.StageCheckpoint, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageCheckpoint)).Return(func(ctx context.Context, in activities.StageInput) (cluster.StageReport, error) {
		return cluster.StageReport{Nodes: len(in.Alloc.Nodes)}, f.hit(ctx, point.StageCheckpoint)
	})
	env.OnActivity(a.BringUp, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageBringUp)).Return(func(ctx context.Context, in activities.StageInput) (cluster.Server, error) {
		return cluster.Server{URL: "http://127.0.0.1:1", Mode: in.Mode}, f.hit(ctx, point.StageBringUp+":"+in.Mode)
	})
	env.OnActivity(a.Warmup, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageWarmup)).Return(func(ctx context.Context, in activities.StageInput) error {
		return f.hit(ctx, point.StageWarmup)
	})
	env.OnActivity(a.Perf, mock.Anything, mock.Anything).AfterFn(f.wait(point.StagePerf)).Return(func(ctx context.Context, in activities.StageInput) (point.PerfSummary, error) {
		f.mu.Lock()
		f.perfIns = append(f.perfIns, in)
		f.mu.Unlock()
		return point.PerfSummary{OutputTputPerGPU: 100, Simulated: true, Power: f.perfPower}, f.hit(ctx, point.StagePerf)
	})
	env.OnActivity(a.Eval, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageEval)).Return(func(ctx context.Context, in activities.StageInput) (point.EvalSummary, error) {
		return point.EvalSummary{EMStrict: 0.95, EMFlexible: 0.95, Passed: f.evalPass, Floor: 0.91}, f.hit(ctx, point.StageEval)
	})
	env.OnActivity(a.Upload, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageUpload)).Return(func(ctx context.Context, in activities.UploadInput) error {
		f.mu.Lock()
		f.uploads = append(f.uploads, in)
		f.mu.Unlock()
		return f.hit(ctx, point.StageUpload)
	})
	env.OnActivity(a.Teardown, mock.Anything, mock.Anything).AfterFn(f.wait(point.StageTeardown)).Return(func(ctx context.Context, in activities.StageInput) error {
		return f.hit(ctx, point.StageTeardown)
	})
	env.OnActivity(a.RecordPoint, mock.Anything, mock.Anything).Return(func(ctx context.Context, rec activities.PointRecord) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls["record:"+rec.Status]++
		f.records = append(f.records, rec)
		if left := f.failures[stageRecord]; left != 0 {
			if left > 0 {
				f.failures[stageRecord] = left - 1
			}
			return errors.New("planted ledger failure")
		}
		return nil
	})
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
}

// stageRecord keys planted RecordPoint failures in fakeStages.failures.
const stageRecord = "record"

func testPoint(eval bool) point.Spec {
	return point.Spec{SweepID: "s1", PointID: "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768", ConfigKey: "k", Topology: "2P1D DEP16/DEP32",
		Conc: 768, Nodes: 16, GPUs: 64, Identity: "dep-c768", Eval: eval, SyntheticAL: 3.77}
}

func pointEnv(t *testing.T, f *fakeStages) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(PointWorkflow)
	f.register(env)
	return env
}

var fastTuning = Tuning{RetryInterval: time.Second, MaxAttempts: 3, OperatorTimeout: time.Hour}

func TestPointWorkflow(t *testing.T) {
	type decision struct {
		after  time.Duration
		action string
	}
	tests := []struct {
		name        string
		eval        bool
		setup       func(f *fakeStages)
		decisions   []decision
		wantStatus  string
		wantErr     bool
		wantCalls   map[string]int
		wantFailed  string
		wantOutcome map[string]string // stage -> outcome in the state
		wantSkipped []string
		wantMissing []string
	}{
		{
			name: "happy path with eval restarts the server without synthetic acceptance",
			eval: true, wantStatus: point.StatusCompleted,
			wantCalls: map[string]int{point.StagePerf: 1, point.StageEval: 1, "bringup:perf": 1, "bringup:eval": 1, point.StageTeardown: 1, "record:completed": 1},
		},
		{
			name:       "a stage fails once then succeeds on retry",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = 1 },
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StagePerf: 2, point.StageTeardown: 1},
		},
		{
			name:       "out of retries, operator retries, perf resumes",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = 3 },
			decisions:  []decision{{time.Minute, ActionRetry}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StagePerf: 4, point.StageWarmup: 1, point.StageTeardown: 1},
		},
		{
			name: "out of retries at eval, operator skips it: incomplete, not completed",
			eval: true, setup: func(f *fakeStages) { f.failures[point.StageEval] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StageEval: 3, point.StageUpload: 1, point.StageTeardown: 1, "record:incomplete": 1},
			wantOutcome: map[string]string{point.StageEval: "skipped"},
			wantSkipped: []string{point.StageEval}, wantMissing: []string{point.StageEval},
		},
		{
			name:        "perf skipped by the operator: upload runs, the point is incomplete",
			setup:       func(f *fakeStages) { f.failures[point.StagePerf] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StagePerf: 3, point.StageUpload: 1, point.StageTeardown: 1, "record:incomplete": 1},
			wantOutcome: map[string]string{point.StagePerf: "skipped"},
			wantSkipped: []string{point.StagePerf}, wantMissing: []string{point.StagePerf},
		},
		{
			name:        "upload skipped by the operator: perf exists but was not uploaded",
			setup:       func(f *fakeStages) { f.failures[point.StageUpload] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StagePerf: 1, point.StageUpload: 3, point.StageTeardown: 1, "record:incomplete": 1},
			wantSkipped: []string{point.StageUpload}, wantMissing: []string{point.StageUpload},
		},
		{
			name:        "warmup skipped: perf still measured, but the point is incomplete",
			setup:       func(f *fakeStages) { f.failures[point.StageWarmup] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StagePerf: 1, point.StageUpload: 1},
			wantSkipped: []string{point.StageWarmup},
		},
		{
			name:        "checkpoint skipped: nothing runs on the nodes, teardown still does",
			eval:        true,
			setup:       func(f *fakeStages) { f.failures[point.StageCheckpoint] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{"bringup:perf": 0, point.StagePerf: 0, point.StageUpload: 0, point.StageTeardown: 1, "record:incomplete": 1},
			wantSkipped: []string{point.StageCheckpoint},
			wantMissing: []string{point.StagePerf, point.StageEval, point.StageUpload},
		},
		{
			name:        "bring-up skipped: the point ends incomplete",
			setup:       func(f *fakeStages) { f.failures["bringup:perf"] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StagePerf: 0, point.StageTeardown: 1},
			wantSkipped: []string{point.StageBringUp},
		},
		{
			name:       "out of retries, operator aborts, teardown runs",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = -1 },
			decisions:  []decision{{time.Minute, ActionAbort}},
			wantStatus: point.StatusAborted, wantErr: true, wantFailed: point.StagePerf,
			wantCalls: map[string]int{point.StagePerf: 3, point.StageUpload: 0, point.StageTeardown: 1, "record:aborted": 1},
		},
		{
			name:       "nobody decides: aborted after the operator timeout",
			setup:      func(f *fakeStages) { f.failures[point.StageWarmup] = -1 },
			wantStatus: point.StatusAborted, wantErr: true, wantFailed: point.StageWarmup,
			wantCalls: map[string]int{point.StageWarmup: 3, point.StagePerf: 0, point.StageTeardown: 1},
		},
		{
			name: "non-retryable checksum mismatch goes straight to the gate",
			setup: func(f *fakeStages) {
				f.failures[point.StageCheckpoint] = 1
				f.errType[point.StageCheckpoint] = string(failure.ErrChecksumMismatch)
			},
			decisions:  []decision{{time.Minute, ActionRetry}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageCheckpoint: 2, point.StagePerf: 1},
		},
		{
			name: "eval below floor is a verdict, not an error",
			eval: true, setup: func(f *fakeStages) { f.evalPass = false },
			wantStatus: point.StatusEvalFailed,
			wantCalls:  map[string]int{point.StageEval: 1, point.StageUpload: 1, "record:eval-failed": 1},
		},
		{
			// It used to end completed, with no perf, eval or upload.
			name:        "allocation skipped by the operator ends the point incomplete, without teardown",
			setup:       func(f *fakeStages) { f.failures[point.StageAllocate] = -1 },
			decisions:   []decision{{time.Minute, ActionSkip}},
			wantStatus:  point.StatusIncomplete,
			wantCalls:   map[string]int{point.StageCheckpoint: 0, point.StageTeardown: 0, "record:incomplete": 1, "record:completed": 0},
			wantSkipped: []string{point.StageAllocate},
			wantMissing: []string{point.StagePerf, point.StageUpload},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			if tc.setup != nil {
				tc.setup(f)
			}
			env := pointEnv(t, f)
			var rejected []string
			for _, d := range tc.decisions {
				env.RegisterDelayedCallback(func() {
					var st PointState
					v, err := env.QueryWorkflow(QueryState)
					require.NoError(t, err)
					require.NoError(t, v.Get(&st))
					require.Equal(t, point.StatusAwaitingOperator, st.Status, "point must be parked before the decision")
					// An unknown action is rejected by the validator.
					env.UpdateWorkflow(UpdateDecide, "bad", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { rejected = append(rejected, err.Error()) },
						OnAccept: func() { t.Error("reboot must be rejected") }, OnComplete: func(any, error) {},
					}, Decision{Action: "reboot"})
					env.UpdateWorkflow(UpdateDecide, "ok", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("decision rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, Decision{Action: d.action})
				}, d.after)
			}
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(tc.eval), TaskQueue: "cluster-test", Tuning: fastTuning})
			require.True(t, env.IsWorkflowCompleted())
			var st PointState
			err := env.GetWorkflowError()
			if tc.wantErr {
				require.Error(t, err)
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				require.NoError(t, app.Details(&st))
			} else {
				require.NoError(t, err)
				require.NoError(t, env.GetWorkflowResult(&st))
			}
			require.Equal(t, tc.wantStatus, st.Status)
			if tc.wantFailed != "" {
				require.Equal(t, tc.wantFailed, st.FailedStage)
			}
			for stage, n := range tc.wantCalls {
				require.Equal(t, n, f.count(stage), "calls of %s", stage)
			}
			for stage, outcome := range tc.wantOutcome {
				found := false
				for _, r := range st.Stages {
					if r.Stage == stage {
						found = true
						require.Equal(t, point.Outcome(outcome), r.Outcome)
					}
				}
				require.True(t, found, "stage %s in state", stage)
			}
			require.Equal(t, tc.wantSkipped, st.Skipped)
			if tc.wantMissing != nil || tc.wantStatus == point.StatusCompleted {
				require.Equal(t, tc.wantMissing, st.Missing)
			}
			require.Zero(t, st.NodesHeld, "a finished point holds no nodes")
			if len(tc.decisions) > 0 {
				require.Len(t, rejected, len(tc.decisions))
				require.Contains(t, rejected[0], `unknown action "reboot"`)
			}
		})
	}
}

// TestPointWarmupSkippedIsRecorded: figures measured after an operator
// skipped the warmup reach perf and the upload marked as such (their
// profile then says "warmup: skipped", see activities.TestReuseHonoursHowThePointEnded).
func TestPointWarmupSkippedIsRecorded(t *testing.T) {
	{
		f := newFake()
		f.failures[point.StageWarmup] = -1
		env := pointEnv(t, f)
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(UpdateDecide, "skip", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("decision rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
			}, Decision{Action: ActionSkip})
		}, time.Minute)
		env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "cluster-test", Tuning: fastTuning})
		require.True(t, env.IsWorkflowCompleted())
		require.NoError(t, env.GetWorkflowError())
		require.Len(t, f.perfIns, 1)
		require.Len(t, f.uploads, 1)
		require.True(t, f.perfIns[0].Point.WarmupSkipped, "perf input")
		require.True(t, f.uploads[0].Point.WarmupSkipped, "upload input")
	}
	// A point whose warmup ran is measured warm.
	f := newFake()
	env := pointEnv(t, f)
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "cluster-test", Tuning: fastTuning})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, f.perfIns, 1)
	require.False(t, f.perfIns[0].Point.WarmupSkipped)
	require.False(t, f.uploads[0].Point.WarmupSkipped)
}

// TestPointRecordFailureIsVisible: a ledger record out of retries is tried
// again after pauses; if it still fails, the point fails with why (the
// ledger would show a stale status), and its state says so.
func TestPointRecordFailureIsVisible(t *testing.T) {
	const attempts = 10 // the ledger pseudo-stage's retry budget
	cases := []struct {
		name     string
		failures int
		wantErr  bool
		wantRecs int
	}{
		{"recovers in the second pause", attempts + 2, false, attempts + 3},
		{"never recovers: the point fails", -1, true, attempts * (1 + autoRetries)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.failures[stageRecord] = tc.failures
			env := pointEnv(t, f)
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "cluster-test", Tuning: fastTuning})
			require.True(t, env.IsWorkflowCompleted())
			require.Equal(t, tc.wantRecs, f.count("record:"+point.StatusCompleted))
			err := env.GetWorkflowError()
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.Equal(t, string(failure.ErrPointUnrecorded), app.Type())
			require.Contains(t, app.Error(), "completed, but the ledger still shows an older status: recording it failed: planted ledger failure")
			var st PointState
			require.NoError(t, app.Details(&st))
			require.Equal(t, point.StatusCompleted, st.Status)
			require.Equal(t, "planted ledger failure", st.RecordError)
		})
	}
}

func TestPointDecisionRejectedWhileRunning(t *testing.T) {
	f := newFake()
	env := pointEnv(t, f)
	var rejectedErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateDecide, "early", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejectedErr = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, Decision{Action: ActionRetry})
	}, 0)
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: fastTuning})
	require.NoError(t, env.GetWorkflowError())
	require.Error(t, rejectedErr)
	require.Contains(t, rejectedErr.Error(), "not waiting")
}

func TestPointCancelDuringPerfTearsDown(t *testing.T) {
	f := newFake()
	f.block[point.StagePerf] = true
	env := pointEnv(t, f)
	// Virtual time stands still while an activity runs, so cancel from the
	// perf activity's start instead of a timer.
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "Perf" {
			go func() { time.Sleep(50 * time.Millisecond); env.CancelWorkflow() }()
		}
	})
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(true), TaskQueue: "q", Tuning: Tuning{HeartbeatTimeout: time.Minute}})
	require.True(t, env.IsWorkflowCompleted())
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
	require.Equal(t, 1, f.count(point.StagePerf))
	require.Equal(t, 1, f.count(point.StageTeardown), "teardown must run after cancel")
	require.Equal(t, 0, f.count(point.StageEval))
	require.Equal(t, 1, f.count("record:cancelled"))
}

func TestPointReusesLedgerOutputs(t *testing.T) {
	tests := []struct {
		name      string
		reused    activities.Reused
		force     []string
		wantCalls map[string]int
	}{
		{"perf and eval reused: no allocation at all",
			activities.Reused{Perf: &point.PerfSummary{OutputTputPerGPU: 1}, PerfSweep: "old", Eval: &point.EvalSummary{Passed: true}, EvalSweep: "old"}, nil,
			map[string]int{point.StageAllocate: 0, point.StagePerf: 0, point.StageEval: 0, point.StageUpload: 1, point.StageTeardown: 0}},
		{"only eval missing: server up in eval mode, no warmup or perf",
			activities.Reused{Perf: &point.PerfSummary{OutputTputPerGPU: 1}, PerfSweep: "old"}, nil,
			map[string]int{point.StageAllocate: 1, "bringup:perf": 0, "bringup:eval": 1, point.StageWarmup: 0, point.StagePerf: 0, point.StageEval: 1, point.StageTeardown: 1}},
		{"--force perf reruns perf despite the ledger",
			activities.Reused{Perf: &point.PerfSummary{OutputTputPerGPU: 1}, PerfSweep: "old", Eval: &point.EvalSummary{Passed: true}, EvalSweep: "old"}, []string{point.StagePerf},
			map[string]int{"bringup:perf": 1, point.StagePerf: 1, point.StageEval: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			env := pointEnv(t, f)
			var a *activities.Activities
			env.OnActivity(a.LookupReuse, mock.Anything, mock.Anything).Return(tc.reused, nil)
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(true), TaskQueue: "q", Tuning: fastTuning, ReuseFrom: []string{"old"}, Force: tc.force})
			require.NoError(t, env.GetWorkflowError())
			for stage, n := range tc.wantCalls {
				require.Equal(t, n, f.count(stage), "calls of %s", stage)
			}
		})
	}
}

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
	f.errType[point.StagePerf] = string(failure.ErrPowerInvalid)
	f.errDetails[point.StagePerf] = energy.Figures{Source: energy.SourceNVML, Reasons: []string{energy.ReasonGap}}
	f.perfPower = &energy.Figures{Source: energy.SourceNVML, Valid: true, JoulesPerOutputToken: 0.5}
	env := pointEnv(t, f)
	atGate, st := runRetriedAtGate(t, env)
	assert.Equal(t, point.StatusAwaitingOperator, atGate.Status)
	assert.Equal(t, point.StagePerf, atGate.Stage)
	assert.Contains(t, atGate.LastError, "planted perf failure")
	assert.Equal(t, point.StatusCompleted, st.Status)
	require.NotNil(t, st.Perf)
	assert.True(t, st.Perf.Power.Valid)
	assert.Equal(t, 2, f.calls[point.StagePerf], "one refused attempt, one retried by the operator")
}

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

// TestPointReleasesNodesWhileWaiting: a point parked at the operator gate
// longer than Tuning.NodeHold tears its allocation down; a retry (or a skip
// with node stages left) allocates again and brings the server up again,
// keeping the stages that finished. `hold` at the gate, or a decision with
// Hold, keeps the nodes instead.
func TestPointReleasesNodesWhileWaiting(t *testing.T) {
	type op struct {
		at time.Duration
		d  Decision
	}
	type probe struct {
		at        time.Duration
		nodesHeld int
		released  bool
		status    string
	}
	tuning := fastTuning
	tuning.NodeHold = 10 * time.Minute
	tests := []struct {
		name        string
		eval        bool
		tuning      *Tuning
		setup       func(f *fakeStages)
		ops         []op
		probes      []probe
		wantStatus  string
		wantErr     bool
		wantCalls   map[string]int
		wantSkipped []string
	}{
		{
			name:  "past the hold the nodes go back; retry re-allocates and completes",
			eval:  true,
			setup: func(f *fakeStages) { f.failures[point.StagePerf] = 3 },
			ops:   []op{{30 * time.Minute, Decision{Action: ActionRetry}}},
			probes: []probe{
				{5 * time.Minute, 16, false, point.StatusAwaitingOperator},
				{20 * time.Minute, 0, true, point.StatusAwaitingOperator},
			},
			wantStatus: point.StatusCompleted,
			wantCalls: map[string]int{point.StageAllocate: 2, point.StageCheckpoint: 2, "bringup:perf": 2, point.StageWarmup: 2,
				point.StagePerf: 4, "bringup:eval": 1, point.StageEval: 1, point.StageTeardown: 2, point.StageUpload: 1},
		},
		{
			name:       "a decision within the hold keeps the allocation",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = 3 },
			ops:        []op{{5 * time.Minute, Decision{Action: ActionRetry}}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageAllocate: 1, point.StagePerf: 4, point.StageTeardown: 1},
		},
		{
			name:  "hold at the gate keeps the nodes past the hold",
			setup: func(f *fakeStages) { f.failures[point.StagePerf] = 3 },
			ops:   []op{{5 * time.Minute, Decision{Action: ActionHold}}, {30 * time.Minute, Decision{Action: ActionRetry}}},
			probes: []probe{
				{20 * time.Minute, 16, false, point.StatusAwaitingOperator},
			},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageAllocate: 1, point.StagePerf: 4, point.StageTeardown: 1},
		},
		{
			name:  "retry --hold keeps the nodes at the next gate",
			setup: func(f *fakeStages) { f.failures[point.StagePerf] = 6 },
			ops: []op{
				{5 * time.Minute, Decision{Action: ActionRetry, Hold: true}},
				{50 * time.Minute, Decision{Action: ActionRetry}},
			},
			probes:     []probe{{40 * time.Minute, 16, false, point.StatusAwaitingOperator}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageAllocate: 1, point.StagePerf: 7, point.StageTeardown: 1},
		},
		{
			name:       "a negative hold never releases",
			tuning:     &Tuning{RetryInterval: time.Second, MaxAttempts: 3, OperatorTimeout: time.Hour, NodeHold: -1},
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = 3 },
			ops:        []op{{50 * time.Minute, Decision{Action: ActionRetry}}},
			probes:     []probe{{40 * time.Minute, 16, false, point.StatusAwaitingOperator}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageAllocate: 1, point.StageTeardown: 1},
		},
		{
			name:        "perf skipped after the release: eval re-allocates, perf does not run again",
			eval:        true,
			setup:       func(f *fakeStages) { f.failures[point.StagePerf] = -1 },
			ops:         []op{{30 * time.Minute, Decision{Action: ActionSkip}}},
			wantStatus:  point.StatusIncomplete,
			wantSkipped: []string{point.StagePerf},
			wantCalls: map[string]int{point.StageAllocate: 2, "bringup:perf": 1, point.StagePerf: 3,
				"bringup:eval": 1, point.StageEval: 1, point.StageTeardown: 2, point.StageUpload: 1},
		},
		{
			name:        "warmup skipped after the release: fresh nodes, no second warmup",
			setup:       func(f *fakeStages) { f.failures[point.StageWarmup] = -1 },
			ops:         []op{{30 * time.Minute, Decision{Action: ActionSkip}}},
			wantStatus:  point.StatusIncomplete,
			wantSkipped: []string{point.StageWarmup},
			wantCalls: map[string]int{point.StageAllocate: 2, "bringup:perf": 2, point.StageWarmup: 3,
				point.StagePerf: 1, point.StageTeardown: 2, point.StageUpload: 1},
		},
		{
			name:        "eval skipped after the release: nothing left for nodes, no re-allocation",
			eval:        true,
			setup:       func(f *fakeStages) { f.failures[point.StageEval] = -1 },
			ops:         []op{{30 * time.Minute, Decision{Action: ActionSkip}}},
			wantStatus:  point.StatusIncomplete,
			wantSkipped: []string{point.StageEval},
			wantCalls:   map[string]int{point.StageAllocate: 1, point.StagePerf: 1, point.StageTeardown: 1, point.StageUpload: 1},
		},
		{
			name:       "abort after the release does not tear down twice",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = -1 },
			ops:        []op{{30 * time.Minute, Decision{Action: ActionAbort}}},
			wantStatus: point.StatusAborted, wantErr: true,
			wantCalls: map[string]int{point.StageAllocate: 1, point.StageTeardown: 1, point.StageUpload: 0, "record:aborted": 1},
		},
		{
			name:       "operator timeout after the release: aborted, one teardown",
			setup:      func(f *fakeStages) { f.failures[point.StagePerf] = -1 },
			wantStatus: point.StatusAborted, wantErr: true,
			wantCalls: map[string]int{point.StageAllocate: 1, point.StageTeardown: 1},
		},
		{
			name:       "upload waits without nodes: retry does not re-allocate",
			setup:      func(f *fakeStages) { f.failures[point.StageUpload] = 3 },
			ops:        []op{{30 * time.Minute, Decision{Action: ActionRetry}}},
			wantStatus: point.StatusCompleted,
			wantCalls:  map[string]int{point.StageAllocate: 1, point.StageUpload: 4, point.StageTeardown: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.setup(f)
			env := pointEnv(t, f)
			for i, o := range tc.ops {
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow(UpdateDecide, fmt.Sprintf("%s-%d", o.d.Action, i), &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("%s rejected: %v", o.d.Action, err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, o.d)
				}, o.at)
			}
			for _, p := range tc.probes {
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryState)
					require.NoError(t, err)
					var st PointState
					require.NoError(t, v.Get(&st))
					require.Equal(t, p.status, st.Status, "at %s", p.at)
					require.Equal(t, p.nodesHeld, st.NodesHeld, "nodes held at %s", p.at)
					require.Equal(t, p.released, st.Released, "released at %s", p.at)
				}, p.at)
			}
			tun := tuning
			if tc.tuning != nil {
				tun = *tc.tuning
			}
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(tc.eval), TaskQueue: "q", Tuning: tun})
			require.True(t, env.IsWorkflowCompleted())
			var st PointState
			if tc.wantErr {
				require.Error(t, env.GetWorkflowError())
				require.Equal(t, 1, f.count("record:"+tc.wantStatus))
			} else {
				require.NoError(t, env.GetWorkflowError())
				require.NoError(t, env.GetWorkflowResult(&st))
				require.Equal(t, tc.wantStatus, st.Status)
				require.Equal(t, tc.wantSkipped, st.Skipped)
				require.Zero(t, st.NodesHeld)
			}
			for stage, n := range tc.wantCalls {
				require.Equal(t, n, f.count(stage), "calls of %s", stage)
			}
		})
	}
}

// TestPointHoldRejectedAfterRelease: once the nodes are gone, hold cannot
// bring them back; the message says how (retry --hold).
func TestPointHoldRejectedAfterRelease(t *testing.T) {
	f := newFake()
	f.failures[point.StagePerf] = 3
	env := pointEnv(t, f)
	var rejected error
	decideAt(t, env, 20*time.Minute, Decision{Action: ActionHold}, func(err error) { rejected = err })
	decideAt(t, env, 30*time.Minute, Decision{Action: ActionRetry}, nil)
	tun := fastTuning
	tun.NodeHold = 10 * time.Minute
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: tun})
	require.NoError(t, env.GetWorkflowError())
	require.Error(t, rejected)
	require.Contains(t, rejected.Error(), "already released its nodes")
	require.Equal(t, 2, f.count(point.StageAllocate))
}

// TestPointTearsDownBeforeUpload: the allocation goes back before the
// upload, which needs no node, so an upload that waits for an operator holds
// no GPUs (and cannot be told to hold any).
func TestPointTearsDownBeforeUpload(t *testing.T) {
	tests := []struct {
		name           string
		uploadFails    int
		wantTail       []string
		wantHeldAtGate int // -1: no gate
	}{
		{name: "teardown, then upload", wantTail: []string{point.StageTeardown, point.StageUpload}, wantHeldAtGate: -1},
		{name: "a failing upload waits with no nodes", uploadFails: 3,
			wantTail: []string{point.StageTeardown, point.StageUpload, point.StageUpload, point.StageUpload, point.StageUpload}, wantHeldAtGate: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.failures[point.StageUpload] = tc.uploadFails
			env := pointEnv(t, f)
			var holdErr error
			if tc.wantHeldAtGate >= 0 {
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryState)
					require.NoError(t, err)
					var st PointState
					require.NoError(t, v.Get(&st))
					require.Equal(t, point.StatusAwaitingOperator, st.Status)
					require.Equal(t, point.StageUpload, st.Stage)
					require.Equal(t, tc.wantHeldAtGate, st.NodesHeld, "nodes held while the upload waits")
				}, 5*time.Minute)
				decideAt(t, env, 5*time.Minute+time.Second, Decision{Action: ActionHold}, func(err error) { holdErr = err })
				decideAt(t, env, 6*time.Minute, Decision{Action: ActionRetry}, nil)
			}
			st := runCompleted(t, env)
			require.Equal(t, 1, f.count(point.StageAllocate))
			require.Equal(t, 1, f.count(point.StageTeardown))
			require.Zero(t, st.NodesHeld)
			f.mu.Lock()
			tail := f.order[len(f.order)-len(tc.wantTail):]
			f.mu.Unlock()
			require.Equal(t, tc.wantTail, tail)
			if tc.wantHeldAtGate == 0 {
				require.ErrorContains(t, holdErr, "holds no nodes at upload")
			}
		})
	}
}

// runRetriedAtGate runs the test point, reads its state 10 minutes in (at
// the operator gate), decides retry there, and returns that state and the
// point's final state.
func runRetriedAtGate(t *testing.T, env *testsuite.TestWorkflowEnvironment) (atGate, final PointState) {
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
	require.NoError(t, env.GetWorkflowResult(&final))
	return atGate, final
}

// runCompleted runs the test point with no release by the node-hold timer,
// and returns its final state, which must be completed.
func runCompleted(t *testing.T, env *testsuite.TestWorkflowEnvironment) PointState {
	tun := fastTuning
	tun.NodeHold = time.Hour
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: tun})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st PointState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, point.StatusCompleted, st.Status)
	return st
}

// decideAt sends an operator decision at the given time on the workflow
// clock; reject receives a rejection (nil: a rejection fails the test).
func decideAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration, d Decision, reject func(error)) {
	if reject == nil {
		reject = func(err error) { t.Errorf("%s rejected: %v", d.Action, err) }
	}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateDecide, d.Action, &testsuite.TestUpdateCallback{
			OnReject: reject, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, d)
	}, at)
}

// A perf stage whose retries end in heartbeat timeouts (worker or server
// out of reach) retries by itself after a pause, on the same nodes; other
// errors and a fourth such budget go to the operator.
func TestPointRetriesHeartbeatTimeoutsItself(t *testing.T) {
	tests := []struct {
		name       string
		fails      int    // perf failures (3 use one retry budget)
		errType    string // "" : a plain transient error
		wantAuto   int
		wantGate   bool
		wantPerf   int           // perf attempts
		minPerfFor time.Duration // perf stage's span on the workflow clock
	}{
		{name: "one lost budget, retried after 10 s", fails: 3, errType: timeoutHeartbeat, wantAuto: 1, wantPerf: 4, minPerfFor: 13 * time.Second},
		{name: "three lost budgets, pauses 10+20+40 s", fails: 9, errType: timeoutHeartbeat, wantAuto: 3, wantPerf: 10, minPerfFor: 70 * time.Second},
		{name: "a fourth lost budget asks the operator", fails: 12, errType: timeoutHeartbeat, wantAuto: 3, wantGate: true, wantPerf: 13},
		{name: "an engine error asks the operator", fails: 3, wantGate: true, wantPerf: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.failures[point.StagePerf] = tc.fails
			f.errType[point.StagePerf] = tc.errType
			env := pointEnv(t, f)
			gated := false
			env.RegisterDelayedCallback(func() {
				v, err := env.QueryWorkflow(QueryState)
				require.NoError(t, err)
				var st PointState
				require.NoError(t, v.Get(&st))
				if st.Status == point.StatusAwaitingOperator {
					gated = true
					require.Equal(t, point.StagePerf, st.FailedStage)
					want := "planted transient perf failure"
					if tc.errType != "" {
						want = "timeout: Heartbeat"
					}
					require.Equal(t, want, st.LastError, "the gate shows the last error")
				}
			}, 10*time.Minute)
			decideAt(t, env, 10*time.Minute+time.Second, Decision{Action: ActionRetry}, func(error) {})
			st := runCompleted(t, env)
			require.Equal(t, tc.wantGate, gated, "operator gate")
			require.Equal(t, tc.wantPerf, f.count(point.StagePerf))
			require.Equal(t, 1, f.count(point.StageAllocate), "the nodes stay allocated")
			var perf *point.StageRun
			for i := range st.Stages {
				if st.Stages[i].Stage == point.StagePerf {
					perf = &st.Stages[i]
				}
			}
			require.NotNil(t, perf)
			require.Equal(t, tc.wantAuto, perf.AutoRetries)
			require.Equal(t, point.OutcomeOK, perf.Outcome)
			require.GreaterOrEqual(t, perf.Ended.Sub(perf.Started), tc.minPerfFor)
		})
	}
}

// TestStageAttributeAfterDelay: the Stage search attribute is written for
// a stage only once it has run stageAttrDelay; a status change (running,
// the final status) is written at once. So a point whose stages are quick
// costs two visibility writes, and a long perf run still shows as perf.
func TestStageAttributeAfterDelay(t *testing.T) {
	f := newFake()
	f.block[point.StagePerf] = true
	env := pointEnv(t, f)
	env.SetTestTimeout(30 * time.Second)
	type upsert struct{ stage, status string }
	var during []upsert
	var got []upsert
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		st, _ := sa.GetKeyword(temporalx.SAStage)
		ps, _ := sa.GetKeyword(temporalx.SAPointStatus)
		got = append(got, upsert{st, ps})
		if st == point.StagePerf && during == nil {
			// Virtual time stands still while perf blocks: end it from here.
			during = append([]upsert(nil), got...)
			go func() { time.Sleep(50 * time.Millisecond); env.CancelWorkflow() }()
		}
	}).Return(nil)
	env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(false), TaskQueue: "q", Tuning: fastTuning})
	require.True(t, env.IsWorkflowCompleted())
	assert.Equal(t, []upsert{{point.StageAllocate, point.StatusRunning}, {point.StagePerf, point.StatusRunning}}, during,
		"allocate (status pending -> running) at once; checkpoint, bring-up and warmup were quick; perf after the delay")
	require.NotEmpty(t, got)
	assert.Equal(t, point.StatusCancelled, got[len(got)-1].status, "the final status is written at once")
}

// TestPointStartedRunningWritesNoStartAttribute: a point whose parent
// started it with PointStatus running (startPoint does) writes no search
// attribute until a stage runs stageAttrDelay or its status changes; one
// started as pending (parents recorded before) writes running at its first
// stage, as it used to. Either way the final status is written.
func TestPointStartedRunningWritesNoStartAttribute(t *testing.T) {
	tests := []struct {
		name      string
		startedAs string
		want      []string // statuses written, in order
	}{
		{name: "started running", startedAs: point.StatusRunning, want: []string{point.StatusCompleted}},
		{name: "started pending (older parent)", startedAs: point.StatusPending, want: []string{point.StatusRunning, point.StatusCompleted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := pointEnv(t, newFake())
			require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
				temporalx.SAStage.ValueSet(stageStarting), temporalx.SAPointStatus.ValueSet(tc.startedAs))))
			var got []string
			env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				ps, _ := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalx.SAPointStatus)
				got = append(got, ps)
			}).Return(nil)
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(true), TaskQueue: "q", Tuning: fastTuning})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestStageWatcherOneTimerPerPoint: one watcher times the Stage
// attribute for the whole point. Quick stages share one timer (set at the
// first stage, cancelled at the end) instead of one each; a stage that runs
// past stageAttrDelay is still written stageAttrDelay after its own start,
// also when an earlier stage used part of the pending timer.
func TestStageWatcherOneTimerPerPoint(t *testing.T) {
	type upsert struct {
		stage, status string
		at            time.Duration // since the start
	}
	tests := []struct {
		name        string
		after       map[string]time.Duration
		wantTimers  int
		wantUpserts []upsert
	}{
		{name: "quick stages", wantTimers: 1,
			wantUpserts: []upsert{{"done", point.StatusCompleted, 0}}},
		{name: "long perf after a 1.5 s warmup", wantTimers: 3,
			after: map[string]time.Duration{point.StageWarmup: 1500 * time.Millisecond, point.StagePerf: 3 * time.Second},
			// perf starts at 1.5 s: the first timer fires at 2 s, the
			// second waits out perf's remaining 1.5 s, a third serves the
			// quick stages after perf.
			wantUpserts: []upsert{{point.StagePerf, point.StatusRunning, 3500 * time.Millisecond}, {"done", point.StatusCompleted, 4500 * time.Millisecond}}},
		{name: "two long stages", wantTimers: 3,
			after: map[string]time.Duration{point.StageWarmup: 3 * time.Second, point.StagePerf: 3 * time.Second},
			wantUpserts: []upsert{{point.StageWarmup, point.StatusRunning, 2 * time.Second},
				{point.StagePerf, point.StatusRunning, 5 * time.Second}, {"done", point.StatusCompleted, 6 * time.Second}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			for k, v := range tc.after {
				f.after[k] = v
			}
			env := pointEnv(t, f)
			require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
				temporalx.SAStage.ValueSet(stageStarting), temporalx.SAPointStatus.ValueSet(point.StatusRunning))))
			start := env.Now()
			timers, cancelled := 0, 0
			env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
			env.SetOnTimerCanceledListener(func(string) { cancelled++ })
			var got []upsert
			env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				sa := args.Get(0).(temporal.SearchAttributes)
				st, _ := sa.GetKeyword(temporalx.SAStage)
				ps, _ := sa.GetKeyword(temporalx.SAPointStatus)
				got = append(got, upsert{st, ps, env.Now().Sub(start).Round(100 * time.Millisecond)})
			}).Return(nil)
			env.ExecuteWorkflow(PointWorkflow, PointInput{Point: testPoint(true), TaskQueue: "q", Tuning: fastTuning})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			assert.Equal(t, tc.wantTimers, timers, "timers scheduled")
			assert.Equal(t, tc.wantUpserts, got)
			assert.Equal(t, 1, cancelled, "the watcher's last timer is cancelled at the end")
		})
	}
}
