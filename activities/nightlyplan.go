package activities

import (
	"context"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/replan"
)

// PointSpecs converts a plan's points into what the point workflows run.
// evals is the sweep's evals: setting (a point evals when both say so).
func PointSpecs(p *plan.Plan, cl *config.Cluster, evals bool) []PointSpec {
	out := make([]PointSpec, 0, len(p.Points))
	for _, pt := range p.Points {
		spec := PointSpec{
			PointID: pt.ID, ExpName: pt.ExpName, ConfigKey: pt.ConfigKey, Topology: pt.Topology, Conc: pt.Conc,
			Nodes: pt.Nodes, GPUs: pt.GPUs, PrefillGPUs: pt.PrefillGPUs, DecodeGPUs: pt.DecodeGPUs,
			Identity: pt.Identity, ProfileHash: pt.ProfileHash, Profile: pt.Profile,
			Eval: pt.Eval && evals, Model: pt.Model, ModelPrefix: pt.ModelPrefix,
			Image: pt.Image, RecipePath: pt.RecipePath, Row: pt.Row, ISL: pt.ISL, OSL: pt.OSL,
			DurationSec: pt.DurationSec, Deployment: pt.Topology, SyntheticAL: pt.SyntheticAL, BaselineKey: pt.BaselineKey,
		}
		if pt.Recipe != nil {
			// The reference with its override selector, as the identity has it.
			spec.RecipeDigest = pt.RecipeDigest
			if pt.Recipe.Selector != "" {
				spec.RecipePath = pt.Recipe.Path + ":" + pt.Recipe.Selector
			}
			if m, ok := cl.Models[pt.Recipe.Model.Path]; ok {
				spec.CheckpointSource, spec.CheckpointPath = m.Source, m.Path
			}
		}
		out = append(out, spec)
	}
	return out
}

// NightlyPlanRequest asks for tonight's plan of a nightly schedule's sweep.
type NightlyPlanRequest struct {
	NightlyID string        `json:"nightly_id"`
	Source    replan.Source `json:"source"`
}

// NightlyPlan is tonight's sweep as the files say it today, or the check
// failures that stop it.
type NightlyPlan struct {
	Name       string      `json:"name,omitempty"`
	Cluster    string      `json:"cluster,omitempty"`
	NodeBudget int         `json:"node_budget,omitempty"`
	Points     []PointSpec `json:"points,omitempty"`
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
		out.Points = PointSpecs(res.Plan, res.Cluster, res.Sweep.Evals)
	}
	a.log(ctx).Info("nightly plan", zap.String("nightly", req.NightlyID), zap.String("sweep", req.Source.SweepFile),
		zap.String("commit", res.Commit), zap.Int("points", len(out.Points)), zap.Strings("check_failures", res.Failures))
	return out, nil
}
