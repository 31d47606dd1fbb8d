package nightly

import (
	"context"
	"errors"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// Activities are the nightly's activities: plan tonight's sweep, compare it
// with its baselines, record a night whose check failed, post the webhook.
// They need the ledger, the artifact store for the report, and a state
// directory for scratch files; no cluster backend. The worker registers
// them on every cluster queue, beside the stage activities.
type Activities struct {
	Store     *results.Store
	Artifacts artifacts.Store
	// StateDir holds scratch files: git exports of a schedule's sources.
	StateDir string
	Logger   *zap.Logger
}

// PlanRequest asks for tonight's plan of a nightly schedule's sweep.
type PlanRequest struct {
	NightlyID string `json:"nightly_id"`
	Source    Source `json:"source"`
}

// Plan is tonight's sweep as the files say it today, or the check failures
// that stop it.
type Plan struct {
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
func (a *Activities) PlanNightly(ctx context.Context, req PlanRequest) (Plan, error) {
	activity.RecordHeartbeat(ctx, "planning")
	scratch := filepath.Join(a.StateDir, "scratch", "nightly-sources")
	res, err := PlanSource(ctx, req.Source, scratch)
	if err != nil {
		return Plan{}, classify(err)
	}
	out := Plan{Commit: res.Commit, CheckFailures: res.Failures}
	if len(res.Failures) == 0 {
		out.Name, out.Cluster, out.NodeBudget = res.Sweep.Name, res.Cluster.Name, res.Cluster.Nodes
		out.Points = plan.PointSpecs(res.Plan, res.Cluster, res.Sweep.Evals)
	}
	a.log(ctx).Info("nightly plan", zap.String("nightly", req.NightlyID), zap.String("sweep", req.Source.SweepFile),
		zap.String("commit", res.Commit), zap.Int("points", len(out.Points)), zap.Strings("check_failures", res.Failures))
	return out, nil
}

func (a *Activities) log(ctx context.Context) *zap.Logger {
	return activities.ContextLogger(ctx, a.Logger)
}

// classify turns errors into application errors the retry policy
// understands, with the stage activities' types: the nightly's own
// failures (git, the ledger, the artifact store) are transient, a ledger
// conflict is not.
func classify(err error) error {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, results.ErrConflict):
		return temporal.NewNonRetryableApplicationError(err.Error(), string(failure.ErrResultConflict), err)
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), string(failure.ErrTransient), err)
}
