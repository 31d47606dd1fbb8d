// Package nightly is the nightly regression run, in one place: the
// workflow a schedule starts every night (Workflow), which re-plans the
// sweep from its source files (PlanSource), runs it as a child sweep
// without reuse, compares every point with its baseline from the ledger
// (CompareWithBaseline, with the comparison rules in nightly/regress),
// records the report and posts a summary to a webhook; and the small
// Activities those steps run, which need the ledger and the artifact store
// but no cluster backend.
//
// The workflow registers under its historical type name, WorkflowName, and
// its activities keep their method names: recorded histories replay by
// name (testdata/histories).
package nightly

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// WorkflowName is the nightly workflow's registered type name: schedules
// and recorded histories name it.
const WorkflowName = "NightlyWorkflow"

// Input is what a nightly schedule starts Workflow with; the same input
// every night.
type Input struct {
	// Sweep is the planned sweep. Its ID is derived from the nightly's
	// workflow ID (the schedule appends the night's timestamp).
	Sweep workflows.SweepInput `json:"sweep"`
	// Baseline pins a sweep to compare with; empty compares each point with
	// its last completed nightly.
	Baseline   string             `json:"baseline,omitempty"`
	Thresholds regress.Thresholds `json:"thresholds"`
	// Webhook, when set, receives a JSON summary (Summary). It is in
	// the schedule's arguments: with the payload codec on it is encrypted in
	// history, otherwise anyone who can read histories sees it.
	Webhook string `json:"webhook,omitempty"`
	// Source, when set, is where the sweep's files live: each night
	// re-reads them (PlanNightly), runs the checklist and plans again, so
	// Sweep's points only say what the files said at schedule creation.
	Source *Source `json:"source,omitempty"`
	// Forecast, when set, forecasts each night's sweep before it starts
	// (ForecastNight) and posts the forecast to the webhook then; the
	// summary at the end carries it too. Nights started without it (and
	// their recorded histories) run no forecast.
	Forecast *ForecastOptions `json:"forecast,omitempty"`
}

// Result is the nightly workflow's result.
type Result struct {
	Summary      Summary `json:"summary"`
	WebhookError string  `json:"webhook_error,omitempty"`
}

// SweepID is the ID of a nightly's sweep (a child workflow) and the prefix
// of its points' workflow IDs.
func SweepID(nightlyID string) string { return nightlyID + "/sweep" }

// saScheduledStart is set by the schedule on every run it starts: the
// night's nominal time (also for backfills of past nights).
var saScheduledStart = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

var acts *Activities

// Workflow runs a sweep without reuse (every figure measured
// tonight), compares every point with its baseline in an activity that reads
// the ledger, records the report, sets RegressionCount and posts the summary
// to the webhook. It fails only when the sweep or the comparison cannot run;
// regressions are its findings, not its failure.
func Workflow(ctx workflow.Context, in Input) (*Result, error) {
	info := workflow.GetInfo(ctx)
	nid := info.WorkflowExecution.ID
	night, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart)
	if !ok {
		night = info.WorkflowStartTime
	}
	sw := in.Sweep
	sw.SweepID = SweepID(nid)
	sw.Nightly = true
	sw.ReuseFrom, sw.Force = nil, nil
	sum := Summary{NightlyID: nid, SweepID: sw.SweepID, Night: night, Baseline: in.Baseline, Points: len(sw.Points),
		RegressedPoints: []string{}, Findings: []regress.Finding{}}
	if sum.Baseline == "" {
		sum.Baseline = BaselineLatest
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAKind.ValueSet(temporalx.KindNightly), temporalx.SASweepID.ValueSet(sw.SweepID),
		temporalx.SAPointStatus.ValueSet(point.StatusRunning), temporalx.SAStage.ValueSet("sweep"))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("nightly **%s** of %s: running sweep `%s` (%d points), baseline %s",
		night.UTC().Format(time.RFC3339), sw.Name, sw.SweepID, len(sw.Points), sum.Baseline))

	fail := func(stage string, err error) (*Result, error) {
		status := point.StatusFailed
		if ctx.Err() != nil || temporal.IsCanceledError(err) {
			status = point.StatusCancelled
		}
		dctx, cancel := workflow.NewDisconnectedContext(ctx)
		defer cancel()
		_ = workflow.UpsertTypedSearchAttributes(dctx, temporalx.SAPointStatus.ValueSet(status), temporalx.SAStage.ValueSet(stage))
		return nil, err
	}

	if in.Source != nil {
		// Tonight's plan comes from the files as they are tonight.
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("plan"))
		pctx := workflow.WithActivityOptions(ctx, workflows.ActivityOptions(point.StageLedger, sw.TaskQueue, sw.Tuning))
		var np Plan
		if err := workflow.ExecuteActivity(pctx, acts.PlanNightly, PlanRequest{NightlyID: nid, Source: *in.Source}).Get(ctx, &np); err != nil {
			return fail("plan", err)
		}
		sum.SourceCommit = np.Commit
		if len(np.CheckFailures) > 0 {
			// Reported, not run: no GPU time on configs the checklist rejects.
			sum.CheckFailures = np.CheckFailures
			sum.Points = 0
			// The failed night goes into the ledger like any other night's
			// report, with its findings.
			var rep RegressionReport
			req := CheckFailedNight{NightlyID: nid, SweepID: sw.SweepID, Name: cmp.Or(np.Name, sw.Name), Night: night,
				Baseline: in.Baseline, Commit: np.Commit, Failures: np.CheckFailures}
			if err := workflow.ExecuteActivity(pctx, acts.RecordCheckFailure, req).Get(ctx, &rep); err != nil {
				return fail("check", err)
			}
			sum.ReportURI = rep.ReportURI
			_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAPointStatus.ValueSet(point.StatusCheckFailed), temporalx.SAStage.ValueSet("check"))
			workflow.SetCurrentDetails(ctx, details(sum))
			res := &Result{Summary: sum}
			postWebhook(ctx, in, sw, res)
			return res, nil
		}
		sw.Name, sw.Cluster, sw.NodeBudget, sw.Points = np.Name, np.Cluster, np.NodeBudget, np.Points
		sw.TaskQueue = temporalx.ClusterQueue(np.Cluster)
		sum.Points = len(sw.Points)
	}

	if in.Forecast != nil {
		forecastNight(ctx, in, sw, &sum)
	}

	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          sw.SweepID,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		StaticSummary:       fmt.Sprintf("nightly sweep %s: %d points on %s", sw.Name, len(sw.Points), sw.Cluster),
		TypedSearchAttributes: temporal.NewSearchAttributes(temporalx.SAKind.ValueSet(temporalx.KindSweep), temporalx.SASweepID.ValueSet(sw.SweepID),
			temporalx.SAPointStatus.ValueSet(point.StatusRunning)),
	})
	var pr workflows.SweepProgress
	if err := workflow.ExecuteChildWorkflow(cctx, workflows.SweepWorkflow, sw).Get(ctx, &pr); err != nil {
		return fail("sweep", err)
	}
	sum.Counts = pr.Counts

	req := RegressionRequest{NightlyID: nid, SweepID: sw.SweepID, Night: night, Baseline: in.Baseline, Thresholds: in.Thresholds}
	spec := map[string]point.Spec{}
	for _, p := range sw.Points {
		spec[p.PointID] = p
	}
	for _, p := range pr.Points {
		s := spec[p.PointID]
		req.Points = append(req.Points, RegressionPoint{PointID: p.PointID, ConfigKey: s.ConfigKey, Conc: s.Conc,
			BaselineKey: s.BaselineKey, Status: p.Status, Image: s.Image})
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("compare"))
	lctx := workflow.WithActivityOptions(ctx, workflows.ActivityOptions(point.StageLedger, sw.TaskQueue, sw.Tuning))
	var rep RegressionReport
	if err := workflow.ExecuteActivity(lctx, acts.CompareWithBaseline, req).Get(ctx, &rep); err != nil {
		return fail("compare", err)
	}
	sum.Compared, sum.Regressions, sum.ReportURI = rep.Compared, len(rep.Findings), rep.ReportURI
	sum.NoComparable = rep.NoComparable
	sum.Findings = append(sum.Findings, rep.Findings...)
	sum.RegressedPoints = append(sum.RegressedPoints, rep.RegressedPoints...)
	sum.ImageChanges = rep.ImageChanges
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SARegressionCount.ValueSet(int64(len(rep.Findings))),
		temporalx.SAPointStatus.ValueSet(point.StatusCompleted), temporalx.SAStage.ValueSet("done"))
	workflow.SetCurrentDetails(ctx, details(sum))

	res := &Result{Summary: sum}
	postWebhook(ctx, in, sw, res)
	return res, nil
}

// forecastNight forecasts tonight's sweep in an activity (the CPU work of
// running the sweep workflow in virtual time stays out of this workflow)
// and posts it to the webhook before the sweep starts. Neither failing
// stops the night: the summary says why there is no forecast.
func forecastNight(ctx workflow.Context, in Input, sw workflows.SweepInput, sum *Summary) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("forecast"))
	fctx := workflow.WithActivityOptions(ctx, workflows.ActivityOptions(point.StageLedger, sw.TaskQueue, sw.Tuning))
	var b forecast.Brief
	if err := workflow.ExecuteActivity(fctx, acts.ForecastNight, ForecastRequest{NightlyID: sum.NightlyID, Sweep: sw, Options: *in.Forecast}).Get(ctx, &b); err != nil {
		sum.ForecastError = workflows.RootMessage(err)
		workflow.GetLogger(ctx).Warn("nightly forecast failed", "nightly", sum.NightlyID, "error", sum.ForecastError)
	} else {
		sum.Forecast = &b
	}
	start := *sum
	start.Phase = PhaseForecast
	res := &Result{Summary: start}
	postWebhook(ctx, in, sw, res)
	sum.ForecastWebhookError = res.WebhookError
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet("sweep"))
}

// postWebhook posts the summary when the schedule names a webhook;
// a failure is recorded in the result, never fails the night.
func postWebhook(ctx workflow.Context, in Input, sw workflows.SweepInput, res *Result) {
	sum := res.Summary
	nid := sum.NightlyID
	if in.Webhook != "" {
		interval := sw.Tuning.RetryInterval
		if interval <= 0 {
			interval = 5 * time.Second
		}
		wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           sw.TaskQueue,
			StartToCloseTimeout: time.Minute,
			Summary:             "webhook",
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: interval, BackoffCoefficient: 2, MaximumInterval: 20 * interval,
				MaximumAttempts: 6, NonRetryableErrorTypes: []string{ErrWebhookRejected}},
		})
		err := workflow.ExecuteActivity(wctx, acts.PostWebhook, WebhookRequest{URL: in.Webhook, Summary: sum}).Get(ctx, nil)
		if err != nil {
			// The report is in the ledger either way; a dead webhook must
			// not mark the night as failed (and pause the schedule).
			res.WebhookError = workflows.RootMessage(err)
			workflow.GetLogger(ctx).Error("webhook failed", "nightly", nid, "error", res.WebhookError)
		}
	}
}

func details(s Summary) string {
	if len(s.CheckFailures) > 0 {
		lines := []string{fmt.Sprintf("nightly **%s**: **check failed**, no point ran (%d failing findings)", s.Night.UTC().Format(time.RFC3339), len(s.CheckFailures))}
		for _, f := range s.CheckFailures {
			lines = append(lines, "- "+f)
		}
		return strings.Join(lines, "\n\n")
	}
	verdict := fmt.Sprintf("**%d regressions** in %d points (%d compared with %s)", s.Regressions, s.Points, s.Compared, s.Baseline)
	if s.Compared == 0 && s.Regressions == 0 {
		// Nothing was compared: "0 regressions" would be a verdict.
		verdict = fmt.Sprintf("**no comparable baseline** for any of %d points (baseline %s): no verdict", s.Points, s.Baseline)
	}
	lines := []string{fmt.Sprintf("nightly **%s**: %s\n\nsweep `%s`", s.Night.UTC().Format(time.RFC3339), verdict, s.SweepID)}
	for i, f := range s.Findings {
		if i == 20 {
			lines = append(lines, fmt.Sprintf("- ... and %d more (report %s)", len(s.Findings)-i, s.ReportURI))
			break
		}
		lines = append(lines, "- "+f.Message)
	}
	for _, c := range s.ImageChanges {
		lines = append(lines, "- image change: "+c.String())
	}
	for _, n := range s.NoComparable {
		lines = append(lines, "- "+n)
	}
	return strings.Join(lines, "\n\n")
}
