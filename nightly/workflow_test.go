package nightly

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/internal/replaytest"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

func nightlyInput(webhook string) Input {
	return Input{
		Sweep: workflows.SweepInput{Name: "dsv4-agg", Cluster: "local-sim", TaskQueue: "cluster-local-sim", NodeBudget: 4,
			ReuseFrom: []string{"must-not-reuse"}, Force: []string{"perf"},
			Points: []point.Spec{
				{PointID: "c1", ConfigKey: "k", Conc: 1, Nodes: 2, BaselineKey: "bk-c1"},
				{PointID: "c4", ConfigKey: "k", Conc: 4, Nodes: 2, BaselineKey: "bk-c4"},
			}},
		Thresholds: regress.DefaultThresholds(),
		Webhook:    webhook,
	}
}

type nightlyRun struct {
	env      *testsuite.TestWorkflowEnvironment
	sweepIn  workflows.SweepInput
	req      RegressionRequest
	webhook  *WebhookRequest
	attrs    []temporal.SearchAttributes
	hookErr  error
	sweepErr error
}

func runNightly(t *testing.T, in Input, findings []regress.Finding, r *nightlyRun) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	r.env = env
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflow(workflows.SweepWorkflow)
	var a *Activities
	env.RegisterActivity(a)
	night := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(saScheduledStart.ValueSet(night))))
	env.OnWorkflow(workflows.SweepWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.SweepInput) (*workflows.SweepProgress, error) {
		r.sweepIn = in
		if r.sweepErr != nil {
			return nil, r.sweepErr
		}
		return &workflows.SweepProgress{SweepID: in.SweepID, Counts: map[string]int{point.StatusCompleted: 1, point.StatusFailed: 1},
			Points: []workflows.PointProgress{{PointID: "c1", Status: point.StatusCompleted}, {PointID: "c4", Status: point.StatusFailed}}}, nil
	})
	env.OnActivity(a.CompareWithBaseline, mock.Anything, mock.Anything).Return(func(_ context.Context, req RegressionRequest) (RegressionReport, error) {
		r.req = req
		return RegressionReport{SweepID: req.SweepID, Compared: 2, Findings: findings, RegressedPoints: regress.Points(findings),
			ReportURI: "file:///report.json"}, nil
	})
	env.OnActivity(a.PostWebhook, mock.Anything, mock.Anything).Return(func(_ context.Context, req WebhookRequest) error {
		r.webhook = &req
		return r.hookErr
	})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		r.attrs = append(r.attrs, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
}

func lastInt(attrs []temporal.SearchAttributes, key temporal.SearchAttributeKeyInt64) (int64, bool) {
	for i := len(attrs) - 1; i >= 0; i-- {
		if v, ok := attrs[i].GetInt64(key); ok {
			return v, true
		}
	}
	return 0, false
}

func TestNightlyWorkflow(t *testing.T) {
	findings := []regress.Finding{
		{Kind: regress.KindOutputTput, PointID: "c1", Message: "c1 output throughput per GPU down"},
		{Kind: regress.KindNewFailure, PointID: "c4", Message: "c4 now failed"},
	}
	cases := []struct {
		name        string
		webhook     string
		hookErr     error
		findings    []regress.Finding
		wantCount   int64
		wantHookErr string
	}{
		{"regressions and webhook", "http://127.0.0.1:1/hook", nil, findings, 2, ""},
		{"clean night, no webhook", "", nil, nil, 0, ""},
		{"dead webhook does not fail the night", "http://127.0.0.1:1/hook",
			temporal.NewNonRetryableApplicationError("webhook http://127.0.0.1:1/...: HTTP 404", ErrWebhookRejected, nil), findings, 2, "HTTP 404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &nightlyRun{hookErr: tc.hookErr}
			runNightly(t, nightlyInput(tc.webhook), tc.findings, r)
			require.NoError(t, r.env.GetWorkflowError())
			var res Result
			require.NoError(t, r.env.GetWorkflowResult(&res))

			// The sweep runs as a child, measured tonight: no reuse.
			nid := "default-test-workflow-id"
			assert.Equal(t, SweepID(nid), r.sweepIn.SweepID)
			assert.True(t, r.sweepIn.Nightly)
			assert.Empty(t, r.sweepIn.ReuseFrom)
			assert.Empty(t, r.sweepIn.Force)

			// The comparison gets the night, the keys and tonight's statuses.
			assert.Equal(t, time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC), r.req.Night.UTC())
			assert.Equal(t, []RegressionPoint{
				{PointID: "c1", ConfigKey: "k", Conc: 1, BaselineKey: "bk-c1", Status: point.StatusCompleted},
				{PointID: "c4", ConfigKey: "k", Conc: 4, BaselineKey: "bk-c4", Status: point.StatusFailed},
			}, r.req.Points)
			assert.Equal(t, regress.DefaultThresholds(), r.req.Thresholds)

			n, ok := lastInt(r.attrs, temporalx.SARegressionCount)
			require.True(t, ok, "RegressionCount is set")
			assert.Equal(t, tc.wantCount, n)
			assert.Equal(t, int(tc.wantCount), res.Summary.Regressions)
			assert.Equal(t, map[string]int{point.StatusCompleted: 1, point.StatusFailed: 1}, res.Summary.Counts)

			if tc.webhook == "" {
				assert.Nil(t, r.webhook)
				return
			}
			require.NotNil(t, r.webhook)
			assert.Equal(t, tc.webhook, r.webhook.URL)
			body := r.webhook.Summary
			assert.Equal(t, int(tc.wantCount), body.Regressions)
			assert.Equal(t, []string{"c1", "c4"}, body.RegressedPoints)
			assert.Equal(t, BaselineLatest, body.Baseline)
			if tc.wantHookErr != "" {
				assert.Contains(t, res.WebhookError, tc.wantHookErr)
			} else {
				assert.Empty(t, res.WebhookError)
			}
		})
	}
}

func TestNightlyWorkflowSweepFailure(t *testing.T) {
	r := &nightlyRun{sweepErr: errors.New("sweep blew up")}
	runNightly(t, nightlyInput(""), nil, r)
	err := r.env.GetWorkflowError()
	require.Error(t, err, "a sweep that cannot run fails the night (and may pause the schedule)")
	assert.Contains(t, err.Error(), "sweep blew up")
	assert.Empty(t, r.req.SweepID, "no comparison without a sweep")
	_, ok := lastInt(r.attrs, temporalx.SARegressionCount)
	assert.False(t, ok)
}

// TestNightlyCheckFailureRecorded: a night whose re-read configs fail the
// check runs no sweep, writes its report with the findings to the ledger
// (RecordCheckFailure) and names that report in its summary and webhook.
func TestNightlyCheckFailureRecorded(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflow(workflows.SweepWorkflow)
	var a *Activities
	env.RegisterActivity(a)
	night := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(saScheduledStart.ValueSet(night))))
	failures := []string{"upstream-image m.yaml:3: registry.example.com/sglang:patched (expected an upstream image)"}
	env.OnActivity(a.PlanNightly, mock.Anything, mock.Anything).Return(Plan{Name: "dsv4", Commit: "abc", CheckFailures: failures}, nil)
	var rec *CheckFailedNight
	env.OnActivity(a.RecordCheckFailure, mock.Anything, mock.Anything).Return(func(_ context.Context, req CheckFailedNight) (RegressionReport, error) {
		rec = &req
		return RegressionReport{SweepID: req.SweepID, CheckFailures: req.Failures, ReportURI: "file:///check.json"}, nil
	})
	var hook *WebhookRequest
	env.OnActivity(a.PostWebhook, mock.Anything, mock.Anything).Return(func(_ context.Context, req WebhookRequest) error {
		hook = &req
		return nil
	})
	sweepRan := false
	env.OnWorkflow(workflows.SweepWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.SweepInput) (*workflows.SweepProgress, error) {
		sweepRan = true
		return &workflows.SweepProgress{}, nil
	})
	in := nightlyInput("http://127.0.0.1:1/hook")
	in.Source = &Source{SweepFile: "sweep.yaml"}
	env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res Result
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.False(t, sweepRan, "a night whose check fails runs no point")
	require.NotNil(t, rec, "the failed night is recorded in the ledger")
	assert.Equal(t, failures, rec.Failures)
	assert.Equal(t, SweepID("default-test-workflow-id"), rec.SweepID)
	assert.Equal(t, "dsv4", rec.Name)
	assert.Equal(t, "abc", rec.Commit)
	assert.Equal(t, night, rec.Night.UTC())
	assert.Equal(t, failures, res.Summary.CheckFailures)
	assert.Equal(t, "file:///check.json", res.Summary.ReportURI)
	require.NotNil(t, hook)
	assert.Equal(t, "file:///check.json", hook.Summary.ReportURI)
}

// A night that compared nothing gives no verdict: "0 regressions" would read
// as a pass.
func TestNightlyDetailsWithoutComparableBaseline(t *testing.T) {
	s := Summary{Night: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), SweepID: "n", Baseline: "latest-nightly", Points: 2,
		NoComparable: []string{"c1: no comparable baseline: real figures, the baseline's in emu are simulated"}}
	got := details(s)
	assert.Contains(t, got, "**no comparable baseline** for any of 2 points (baseline latest-nightly): no verdict")
	assert.Contains(t, got, "- c1: no comparable baseline: real figures")
	assert.NotContains(t, got, "regressions")
	s.Compared = 1
	assert.Contains(t, details(s), "**0 regressions** in 2 points (1 compared with latest-nightly)")
}

// TestNightlyForecast: a schedule with Forecast forecasts the night's
// sweep in an activity before it starts and posts it to the webhook then
// (phase forecast); the summary at the end carries it too. The points run
// side by side on the 4-node budget: 20 min bring-up, 5 warmup and 10 perf
// (no duration in their rows) each, on 2 nodes.
func TestNightlyForecast(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflow(workflows.SweepWorkflow)
	var a *Activities
	env.RegisterActivity(a)
	env.OnWorkflow(workflows.SweepWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.SweepInput) (*workflows.SweepProgress, error) {
		return &workflows.SweepProgress{SweepID: in.SweepID, Counts: map[string]int{point.StatusCompleted: 2},
			Points: []workflows.PointProgress{{PointID: "c1", Status: point.StatusCompleted}, {PointID: "c4", Status: point.StatusCompleted}}}, nil
	})
	env.OnActivity(a.CompareWithBaseline, mock.Anything, mock.Anything).Return(RegressionReport{Compared: 2}, nil)
	env.OnActivity(a.ForecastNight, mock.Anything, mock.Anything).Return((&Activities{Logger: zap.NewNop()}).ForecastNight)
	var hooks []WebhookRequest
	env.OnActivity(a.PostWebhook, mock.Anything, mock.Anything).Return(func(_ context.Context, req WebhookRequest) error {
		hooks = append(hooks, req)
		return nil
	})
	in := nightlyInput("http://127.0.0.1:1/hook")
	in.Forecast = &ForecastOptions{Profile: forecast.Profile{Name: "local-sim", Nodes: 4, GPUsPerNode: 4, BringUp: 20 * time.Minute},
		Assumptions: forecast.DefaultAssumptions()}
	env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res Result
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Len(t, hooks, 2, "the forecast at the start, the summary at the end")
	start := hooks[0].Summary
	assert.Equal(t, PhaseForecast, start.Phase)
	require.NotNil(t, start.Forecast)
	assert.Equal(t, 2, start.Forecast.Points)
	assert.InDelta(t, 2*2*35.0/60, start.Forecast.NodeHours, 1e-9)
	assert.InDelta(t, 35.0/60, start.Forecast.MakespanHours, 1e-9)
	assert.Zero(t, start.Compared, "no point has run yet")
	end := hooks[1].Summary
	assert.Empty(t, end.Phase)
	assert.Equal(t, start.Forecast, end.Forecast)
	assert.Equal(t, 2, end.Compared)
	assert.Equal(t, end, res.Summary)
}

// TestNightlyWithoutForecastRunsNone: a nightly started without Forecast
// (every schedule created before it, and their recorded histories)
// schedules no forecast activity and posts once.
func TestNightlyWithoutForecastRunsNone(t *testing.T) {
	var r nightlyRun
	runNightly(t, nightlyInput("http://127.0.0.1:1/hook"), nil, &r)
	require.NoError(t, r.env.GetWorkflowError())
	var res Result
	require.NoError(t, r.env.GetWorkflowResult(&res))
	assert.Nil(t, res.Summary.Forecast)
	assert.Empty(t, res.Summary.Phase)
	require.NotNil(t, r.webhook)
	assert.Empty(t, r.webhook.Summary.Phase)
}

// TestReplayRecordedHistories replays nightlies recorded on the real dev
// server (one that found regressions) under the workflow's registered name,
// so a change that would break running nightlies, or a rename of the
// workflow or its activities, fails here. Re-record with
// SWEEPFLOW_RECORD_HISTORIES=1 go test ./e2e -run TestIntegrationNightlyRegression
// only for changes made under the revision rule in the workflows package comment.
func TestReplayRecordedHistories(t *testing.T) {
	glob := filepath.Join("testdata", "histories", "nightly-*.json")
	files, _ := filepath.Glob(glob)
	for _, f := range files {
		// A nightly names its child sweep after its own workflow ID.
		require.FileExists(t, strings.TrimSuffix(f, ".json")+".wid")
	}
	replaytest.Files(t, glob, 1, func(r worker.WorkflowReplayer) {
		r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
		r.RegisterWorkflow(workflows.SweepWorkflow)
	})
}
