package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

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

// TestSweepProgressAttributeThrottled: the sweep's "N/M done" attribute is
// written at the start, at most every progressAttrEvery and at the end, not
// after every point; the final value is exact.
func TestSweepProgressAttributeThrottled(t *testing.T) {
	var progress []string
	listen := func(env *testsuite.TestWorkflowEnvironment) {
		env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
			if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalx.SAStage); ok {
				progress = append(progress, v)
			}
		}).Return(nil)
	}
	var pts []point.Spec
	for i := range 40 {
		pts = append(pts, point.Spec{PointID: fmt.Sprintf("p%02d", i), ConfigKey: "k", Nodes: 2, Conc: i + 1, Topology: "t"})
	}
	runSweep(t, SweepInput{SweepID: "s", Points: pts, NodeBudget: 18, TaskQueue: "q"},
		func(point.Spec) time.Duration { return time.Second }, listen)
	// 40 one-second points, 9 at a time: about 5 s of sweep.
	require.NotEmpty(t, progress)
	assert.Equal(t, "0/40 done", progress[0])
	assert.Equal(t, "40/40 done", progress[len(progress)-1])
	assert.LessOrEqual(t, len(progress), 4, "written every 5 s, not after each of 40 points: %v", progress)
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
