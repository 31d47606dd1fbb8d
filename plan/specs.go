package plan

import (
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/point"
)

// PointSpecs converts a plan's points into what the point workflows run.
// evals is the sweep's evals: setting (a point evals when both say so).
func PointSpecs(p *Plan, cl *config.Cluster, evals bool) []point.Spec {
	out := make([]point.Spec, 0, len(p.Points))
	for _, pt := range p.Points {
		spec := point.Spec{
			PointID: pt.ID, ExpName: pt.ExpName, ConfigKey: pt.ConfigKey, Topology: pt.Topology, Conc: pt.Conc,
			Nodes: pt.Nodes, GPUs: pt.GPUs, PrefillGPUs: pt.PrefillGPUs, DecodeGPUs: pt.DecodeGPUs,
			Identity: pt.Identity, DeploymentHash: pt.DeploymentHash, ProfileHash: pt.ProfileHash, Profile: pt.Profile,
			Eval: pt.Eval && evals, Model: pt.Model, ModelPrefix: pt.ModelPrefix,
			Image: pt.Image, Framework: pt.Framework, RecipePath: pt.RecipePath, Row: pt.Row, ISL: pt.ISL, OSL: pt.OSL,
			DurationSec: pt.DurationSec, Layout: pt.Topology, SyntheticAL: pt.SyntheticAL, BaselineKey: pt.BaselineKey,
		}
		if pt.Recipe != nil {
			// The reference with its override selector, as the identity has it.
			spec.RecipeDigest, spec.RecipeSets = pt.RecipeDigest, pt.RecipeSets
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
