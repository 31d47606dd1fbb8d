package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// A workflow shaped like a point: two stages (one fails), an operator wait
// of 90 minutes of workflow time, then the final record.
func pointLike(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	if err := workflow.ExecuteActivity(ctx, "Perf").Get(ctx, nil); err != nil {
		return err
	}
	_ = workflow.ExecuteActivity(ctx, "Eval").Get(ctx, nil)
	if err := workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("eval"),
		temporalx.SAPointStatus.ValueSet(point.StatusAwaitingOperator)); err != nil {
		return err
	}
	// A repeated publish while waiting must not start a second wait.
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("eval"),
		temporalx.SAPointStatus.ValueSet(point.StatusAwaitingOperator))
	if err := workflow.Sleep(ctx, 90*time.Minute); err != nil {
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("eval"), temporalx.SAPointStatus.ValueSet(point.StatusRunning))
	rec := activities.PointRecord{Point: point.Spec{PointID: "p1"}, Status: point.StatusCompleted}
	return workflow.ExecuteActivity(ctx, "RecordPoint", rec).Get(ctx, nil)
}

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	srvAddr, stop, err := r.Serve("127.0.0.1:0")
	require.NoError(t, err)
	defer stop()
	resp, err := http.Get("http://" + srvAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// value finds one sample: the metric name and every label=value pair given
// must be on the line.
func value(t *testing.T, text, name string, labels ...string) (float64, bool) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		ok := true
		for _, l := range labels {
			if !regexp.MustCompile(`(^|,)` + regexp.QuoteMeta(l) + `(,|$)`).MatchString(m[1]) {
				ok = false
			}
		}
		if ok {
			v, err := strconv.ParseFloat(m[2], 64)
			require.NoError(t, err)
			return v, true
		}
	}
	return 0, false
}

func TestInterceptorRecordsSweepflowMetrics(t *testing.T) {
	reg, err := New(nil, 10*time.Millisecond)
	require.NoError(t, err)

	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(reg.SDKHandler())
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{NewInterceptor()}})
	env.RegisterWorkflow(pointLike)
	env.RegisterActivityWithOptions(func(ctx context.Context) error { return nil }, activity.RegisterOptions{Name: "Perf"})
	env.RegisterActivityWithOptions(func(ctx context.Context) error { return errors.New("boom") }, activity.RegisterOptions{Name: "Eval"})
	env.RegisterActivityWithOptions(func(ctx context.Context, rec activities.PointRecord) error { return nil }, activity.RegisterOptions{Name: "RecordPoint"})
	env.ExecuteWorkflow(pointLike)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, reg.Close()) // flush

	text := scrape(t, reg)
	cases := []struct {
		name   string
		metric string
		labels []string
		want   float64
	}{
		{"perf attempt ok", "sweepflow_stage_duration_seconds_count", []string{`stage="perf"`, `outcome="ok"`}, 1},
		{"eval attempt failed", "sweepflow_stage_duration_seconds_count", []string{`stage="eval"`, `outcome="error"`}, 1},
		{"completed point", "sweepflow_points_finished_total", []string{`status="completed"`}, 1},
		{"one operator wait", "sweepflow_operator_waits_total", []string{`stage="eval"`}, 1},
		{"wait ended by retry", "sweepflow_operator_wait_seconds_count", []string{`stage="eval"`, `outcome="running"`}, 1},
		{"wait of 90 min", "sweepflow_operator_wait_seconds_sum", []string{`stage="eval"`}, 5400},
		{"wait in the 7200 s bucket", "sweepflow_operator_wait_seconds_bucket", []string{`le="7200"`}, 1},
		{"not in the 3600 s bucket", "sweepflow_operator_wait_seconds_bucket", []string{`le="3600"`}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := value(t, text, tc.metric, tc.labels...)
			require.True(t, ok, "%s%v not found in:\n%s", tc.metric, tc.labels, text)
			assert.InDelta(t, tc.want, v, 1e-6)
		})
	}
	_, ok := value(t, text, "sweepflow_stage_duration_seconds_count", `activity_type="RecordPoint"`)
	assert.False(t, ok, "bookkeeping activities are not stages")
}
