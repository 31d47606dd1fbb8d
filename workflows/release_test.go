package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/point"
)

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
