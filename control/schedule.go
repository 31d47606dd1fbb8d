package control

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/nightly"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// Nightly is a nightly regression schedule: a sweep on a cron, compared
// with its baseline each night.
type Nightly struct {
	Cron, TimeZone         string
	SweepFile, ClusterFile string
	// Baseline pins the baseline sweep ("": each point's last completed
	// nightly); Webhook gets each night's summary.
	Baseline, Webhook    string
	Catchup, Jitter      time.Duration
	PauseOnFailure, Fast bool
	// GitDir and GitRef: each night reads the files from this checkout at
	// this ref (SweepFile and ClusterFile relative to its root).
	GitDir, GitRef string
	Allow          []string // check rules waived every night
	// Forecast: each night forecasts its sweep before it starts and posts
	// the forecast to the webhook (nightly.Input.Forecast).
	Forecast bool
}

// NightlySchedule builds the schedule: a nightly workflow per cron tick,
// one at a time (overlap SKIP: a night still running makes the next one
// skip). It plans the sweep once to prove its files are good today.
func NightlySchedule(name string, n Nightly) (client.ScheduleOptions, *nightly.Input, error) {
	ctx := context.Background()
	// Every night re-reads the files from here (PlanNightly); the plan made
	// now only proves they are good today and labels the schedule.
	src := &nightly.Source{SweepFile: AbsPath(n.SweepFile), ClusterFile: AbsPath(n.ClusterFile), Allow: n.Allow}
	if n.GitDir != "" {
		src = &nightly.Source{SweepFile: filepath.ToSlash(n.SweepFile), ClusterFile: filepath.ToSlash(n.ClusterFile),
			GitDir: AbsPath(n.GitDir), GitRef: n.GitRef, Allow: n.Allow}
	}
	scratch, err := os.MkdirTemp("", "sweepflow-schedule-")
	if err != nil {
		return client.ScheduleOptions{}, nil, err
	}
	defer os.RemoveAll(scratch)
	res, err := nightly.PlanSource(ctx, *src, scratch)
	if err != nil {
		return client.ScheduleOptions{}, nil, errtext.FirstLineError(err)
	}
	if len(res.Failures) > 0 {
		return client.ScheduleOptions{}, nil, fmt.Errorf("the sweep fails its check today (%d finding(s)), first: %s", len(res.Failures), res.Failures[0])
	}
	sw := res.Sweep
	in := &workflows.SweepInput{Name: sw.Name, Cluster: res.Cluster.Name, TaskQueue: temporalx.ClusterQueue(res.Cluster.Name),
		NodeBudget: res.Cluster.Nodes, Nightly: true, SweepFile: src.SweepFile, ClusterFile: src.ClusterFile,
		Points: plan.PointSpecs(res.Plan, res.Cluster, sw.Evals)}
	if n.Fast {
		in.Tuning = FastTuning()
	}
	// Each night's sweep ID derives from its workflow ID (the schedule
	// appends the night's time).
	in.SweepID = ""
	nin := &nightly.Input{Sweep: *in, Baseline: n.Baseline, Webhook: n.Webhook, Source: src,
		Thresholds: regress.Thresholds{OutputTputPerGPUDropPct: sw.Regression.OutputTputPerGPUDropPct,
			TTFTp90RisePct: sw.Regression.TTFTp90RisePct, InteractivityDropPct: sw.Regression.InteractivityDropPct}}
	if n.Forecast {
		cl := res.Cluster
		nin.Forecast = &nightly.ForecastOptions{Assumptions: forecast.DefaultAssumptions(),
			Profile: forecast.Profile{Name: cl.Name, Nodes: cl.Nodes, GPUsPerNode: cl.GPUsPerNode, BringUp: cl.BringUpTime}}
	}
	baseline := n.Baseline
	if baseline == "" {
		baseline = "each point's last completed nightly"
	}
	return client.ScheduleOptions{
		ID:             name,
		Spec:           client.ScheduleSpec{CronExpressions: []string{n.Cron}, TimeZoneName: n.TimeZone, Jitter: n.Jitter},
		Overlap:        enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow:  n.Catchup,
		PauseOnFailure: n.PauseOnFailure,
		Note:           fmt.Sprintf("sweepflow nightly: %s (%d points) on %s vs %s", in.Name, len(in.Points), in.Cluster, baseline),
		Action: &client.ScheduleWorkflowAction{
			ID:            name + "-" + in.Name,
			Workflow:      nightly.WorkflowName,
			Args:          []any{*nin},
			TaskQueue:     temporalx.ControlQueue,
			StaticSummary: fmt.Sprintf("nightly %s: sweep %s (%d points on %s) vs %s", name, in.Name, len(in.Points), in.Cluster, baseline),
			TypedSearchAttributes: temporal.NewSearchAttributes(
				temporalx.SAKind.ValueSet(temporalx.KindNightly), temporalx.SAPointStatus.ValueSet(point.StatusRunning)),
		},
	}, nin, nil
}
