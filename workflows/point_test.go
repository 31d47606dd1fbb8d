package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
