package activities

import (
	"context"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/replan"
)

// NightlyPlanRequest asks for tonight's plan of a nightly schedule's sweep.
type NightlyPlanRequest struct {
	NightlyID string        `json:"nightly_id"`
	Source    replan.Source `json:"source"`
}

// NightlyPlan is tonight's sweep as the files say it today, or the check
// failures that stop it.
type NightlyPlan struct {
	Name       string       `json:"name,omitempty"`
	Cluster    string       `json:"cluster,omitempty"`
	NodeBudget int          `json:"node_budget,omitempty"`
	Points     []point.Spec `json:"points,omitempty"`
	// Commit is the commit a git source's ref resolved to.
	Commit string `json:"commit,omitempty"`
	// CheckFailures are the failing `starter check` findings (or the
	// unreadable input); when present no point runs tonight.
	CheckFailures []string `json:"check_failures,omitempty"`
}

// PlanNightly re-reads the schedule's sweep files (a path, or a git ref),
// runs the reviewer checklist and plans the sweep. A bad config or a
// failing check is a result, not an error, so the night is reported as
// such; only infrastructure failures (git) are errors, and retried.
func (a *Activities) PlanNightly(ctx context.Context, req NightlyPlanRequest) (NightlyPlan, error) {
	activity.RecordHeartbeat(ctx, "planning")
	scratch := filepath.Join(a.StateDir, "scratch", "nightly-sources")
	res, err := replan.Run(ctx, req.Source, scratch)
	if err != nil {
		return NightlyPlan{}, classify(err)
	}
	out := NightlyPlan{Commit: res.Commit, CheckFailures: res.Failures}
	if len(res.Failures) == 0 {
		out.Name, out.Cluster, out.NodeBudget = res.Sweep.Name, res.Cluster.Name, res.Cluster.Nodes
		out.Points = plan.PointSpecs(res.Plan, res.Cluster, res.Sweep.Evals)
	}
	a.log(ctx).Info("nightly plan", zap.String("nightly", req.NightlyID), zap.String("sweep", req.Source.SweepFile),
		zap.String("commit", res.Commit), zap.Int("points", len(out.Points)), zap.Strings("check_failures", res.Failures))
	return out, nil
}
