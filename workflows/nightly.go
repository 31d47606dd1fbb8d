package workflows

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/regress"
	"github.com/sweepflow/sweepflow/replan"
	"github.com/sweepflow/sweepflow/temporalx"
)

// KindNightly is the SweepflowKind of a nightly regression run, so
// `SweepflowKind="nightly" AND RegressionCount > 0` lists the bad nights.
const KindNightly = "nightly"

// NightlyInput is what a nightly schedule starts NightlyWorkflow with; the
// same input every night.
type NightlyInput struct {
	// Sweep is the planned sweep. Its ID is derived from the nightly's
	// workflow ID (the schedule appends the night's timestamp).
	Sweep SweepInput `json:"sweep"`
	// Baseline pins a sweep to compare with; empty compares each point with
	// its last completed nightly.
	Baseline   string             `json:"baseline,omitempty"`
	Thresholds regress.Thresholds `json:"thresholds"`
	// Webhook, when set, receives a JSON summary (NightlySummary). It is in
	// the schedule's arguments: with the payload codec on it is encrypted in
	// history, otherwise anyone who can read histories sees it.
	Webhook string `json:"webhook,omitempty"`
	// Source, when set, is where the sweep's files live: each night
	// re-reads them (PlanNightly), runs the checklist and plans again, so
	// Sweep's points only say what the files said at schedule creation.
	Source *replan.Source `json:"source,omitempty"`
}

// NightlySummary is the nightly's outcome and its webhook's JSON body.
type NightlySummary = activities.NightlySummary

// NightlyResult is the nightly workflow's result.
type NightlyResult struct {
	Summary      NightlySummary `json:"summary"`
	WebhookError string         `json:"webhook_error,omitempty"`
}

// changeNightlyCheckReport: a night whose check fails records its report
// in the ledger (RecordCheckFailure) before the webhook.
const changeNightlyCheckReport = "nightly-check-report"

// NightlySweepID is the ID of a nightly's sweep (a child workflow) and the
// prefix of its points' workflow IDs.
func NightlySweepID(nightlyID string) string { return nightlyID + "/sweep" }

// saScheduledStart is set by the schedule on every run it starts: the
// night's nominal time (also for backfills of past nights).
var saScheduledStart = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

var nightlyActs *activities.Activities

// NightlyWorkflow runs a sweep without reuse (every figure measured
// tonight), compares every point with its baseline in an activity that reads
// the ledger, records the report, sets RegressionCount and posts the summary
// to the webhook. It fails only when the sweep or the comparison cannot run;
// regressions are its findings, not its failure.
func NightlyWorkflow(ctx workflow.Context, in NightlyInput) (*NightlyResult, error) {
	info := workflow.GetInfo(ctx)
	nid := info.WorkflowExecution.ID
	night, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart)
	if !ok {
		night = info.WorkflowStartTime
	}
	sw := in.Sweep
	sw.SweepID = NightlySweepID(nid)
	sw.Nightly = true
	sw.ReuseFrom, sw.Force = nil, nil
	sum := NightlySummary{NightlyID: nid, SweepID: sw.SweepID, Night: night, Baseline: in.Baseline, Points: len(sw.Points),
		RegressedPoints: []string{}, Findings: []regress.Finding{}}
	if sum.Baseline == "" {
		sum.Baseline = activities.BaselineLatestNightly
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAKind.ValueSet(KindNightly), SASweepID.ValueSet(sw.SweepID),
		SAPointStatus.ValueSet(StatusRunning), SAStage.ValueSet("sweep"))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("nightly **%s** of %s: running sweep `%s` (%d points), baseline %s",
		night.UTC().Format(time.RFC3339), sw.Name, sw.SweepID, len(sw.Points), sum.Baseline))

	fail := func(stage string, err error) (*NightlyResult, error) {
		status := StatusFailed
		if ctx.Err() != nil || temporal.IsCanceledError(err) {
			status = StatusCancelled
		}
		dctx, cancel := workflow.NewDisconnectedContext(ctx)
		defer cancel()
		_ = workflow.UpsertTypedSearchAttributes(dctx, SAPointStatus.ValueSet(status), SAStage.ValueSet(stage))
		return nil, err
	}

	if in.Source != nil && workflow.GetVersion(ctx, "nightly-replan", workflow.DefaultVersion, 1) == 1 {
		// Tonight's plan comes from the files as they are tonight.
		_ = workflow.UpsertTypedSearchAttributes(ctx, SAStage.ValueSet("plan"))
		pctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, sw.TaskQueue, sw.Tuning))
		var np activities.NightlyPlan
		if err := workflow.ExecuteActivity(pctx, nightlyActs.PlanNightly, activities.NightlyPlanRequest{NightlyID: nid, Source: *in.Source}).Get(ctx, &np); err != nil {
			return fail("plan", err)
		}
		sum.SourceCommit = np.Commit
		if len(np.CheckFailures) > 0 {
			// Reported, not run: no GPU time on configs the checklist rejects.
			sum.CheckFailures = np.CheckFailures
			sum.Points = 0
			if workflow.GetVersion(ctx, changeNightlyCheckReport, workflow.DefaultVersion, 1) == 1 {
				// The failed night goes into the ledger like any other
				// night's report, with its findings.
				pctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, sw.TaskQueue, sw.Tuning))
				var rep activities.RegressionReport
				req := activities.CheckFailedNight{NightlyID: nid, SweepID: sw.SweepID, Name: cmp.Or(np.Name, sw.Name), Night: night,
					Baseline: in.Baseline, Commit: np.Commit, Failures: np.CheckFailures}
				if err := workflow.ExecuteActivity(pctx, nightlyActs.RecordCheckFailure, req).Get(ctx, &rep); err != nil {
					return fail("check", err)
				}
				sum.ReportURI = rep.ReportURI
			}
			_ = workflow.UpsertTypedSearchAttributes(ctx, SAPointStatus.ValueSet(StatusCheckFailed), SAStage.ValueSet("check"))
			workflow.SetCurrentDetails(ctx, nightlyDetails(sum))
			res := &NightlyResult{Summary: sum}
			postNightlyWebhook(ctx, in, sw, res)
			return res, nil
		}
		sw.Name, sw.Cluster, sw.NodeBudget, sw.Points = np.Name, np.Cluster, np.NodeBudget, np.Points
		sw.TaskQueue = temporalx.ClusterQueue(np.Cluster)
		sum.Points = len(sw.Points)
	}

	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          sw.SweepID,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		StaticSummary:       fmt.Sprintf("nightly sweep %s: %d points on %s", sw.Name, len(sw.Points), sw.Cluster),
		TypedSearchAttributes: temporal.NewSearchAttributes(SAKind.ValueSet(KindSweep), SASweepID.ValueSet(sw.SweepID),
			SAPointStatus.ValueSet(StatusRunning)),
	})
	var pr SweepProgress
	if err := workflow.ExecuteChildWorkflow(cctx, SweepWorkflow, sw).Get(ctx, &pr); err != nil {
		return fail("sweep", err)
	}
	sum.Counts = pr.Counts

	req := activities.RegressionRequest{NightlyID: nid, SweepID: sw.SweepID, Night: night, Baseline: in.Baseline, Thresholds: in.Thresholds}
	spec := map[string]activities.PointSpec{}
	for _, p := range sw.Points {
		spec[p.PointID] = p
	}
	for _, p := range pr.Points {
		s := spec[p.PointID]
		req.Points = append(req.Points, activities.RegressionPoint{PointID: p.PointID, ConfigKey: s.ConfigKey, Conc: s.Conc,
			BaselineKey: s.BaselineKey, Status: p.Status, Image: s.Image})
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAStage.ValueSet("compare"))
	lctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, sw.TaskQueue, sw.Tuning))
	var rep activities.RegressionReport
	if err := workflow.ExecuteActivity(lctx, nightlyActs.CompareWithBaseline, req).Get(ctx, &rep); err != nil {
		return fail("compare", err)
	}
	sum.Compared, sum.Regressions, sum.ReportURI = rep.Compared, len(rep.Findings), rep.ReportURI
	sum.NoComparable = rep.NoComparable
	sum.Findings = append(sum.Findings, rep.Findings...)
	sum.RegressedPoints = append(sum.RegressedPoints, rep.RegressedPoints...)
	sum.ImageChanges = rep.ImageChanges
	_ = workflow.UpsertTypedSearchAttributes(ctx, SARegressionCount.ValueSet(int64(len(rep.Findings))),
		SAPointStatus.ValueSet(StatusCompleted), SAStage.ValueSet("done"))
	workflow.SetCurrentDetails(ctx, nightlyDetails(sum))

	res := &NightlyResult{Summary: sum}
	postNightlyWebhook(ctx, in, sw, res)
	return res, nil
}

// postNightlyWebhook posts the summary when the schedule names a webhook;
// a failure is recorded in the result, never fails the night.
func postNightlyWebhook(ctx workflow.Context, in NightlyInput, sw SweepInput, res *NightlyResult) {
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
				MaximumAttempts: 6, NonRetryableErrorTypes: []string{activities.ErrWebhookRejected}},
		})
		err := workflow.ExecuteActivity(wctx, nightlyActs.PostWebhook, activities.WebhookRequest{URL: in.Webhook, Summary: sum}).Get(ctx, nil)
		if err != nil {
			// The report is in the ledger either way; a dead webhook must
			// not mark the night as failed (and pause the schedule).
			res.WebhookError = rootMessage(err)
			workflow.GetLogger(ctx).Error("webhook failed", "nightly", nid, "error", res.WebhookError)
		}
	}
}

func nightlyDetails(s NightlySummary) string {
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
