package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/plan/budgetcheck"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// Request is what `sweep start`, `rerun` and schedules turn into a
// SweepInput.
type Request struct {
	SweepFile   string
	ClusterFile string
	ID          string
	ReuseFrom   []string
	Force       []string
	Faults      []string // point:stage:times
	Tuning      workflows.Tuning
	Nightly     bool
	// Changelog, when set, picks the config keys and eval selection from
	// perf-changelog entries instead of the sweep file's config-keys.
	Changelog *ChangelogRef
	// Canary runs each image and backend's cheapest point first
	// (`sweep start --canary`, see ApplyCanaries).
	Canary bool
	// RecipesRoot overrides the sweep file's and the cluster's recipes
	// root (a root composed from --inferencex and --srt-slurm).
	RecipesRoot string
	// OnePointPerKey plans one point per config key (plan.Options).
	OnePointPerKey bool
	// Adaptive adds to (or, for the same config key, replaces) the sweep
	// file's adaptive requests (`sweep start --adaptive`).
	Adaptive []point.Adaptive
	// RecipeSets are --set overrides for every recipe (plan.Options).
	RecipeSets []string
	// ConfigKeys, when set, replace the sweep file's config keys
	// (`sweep start --config-keys`).
	ConfigKeys []string
}

// Build plans the sweep file and converts every point into the
// workflow's input. Any invalid input fails here, before a GPU is touched.
func Build(req Request) (*workflows.SweepInput, *plan.Plan, error) {
	sw, err := config.LoadSweep(req.SweepFile)
	if err != nil {
		return nil, nil, err
	}
	if len(req.ConfigKeys) > 0 {
		sw.ConfigKeys = req.ConfigKeys
	}
	clusterPath := sw.ClusterPath
	if req.ClusterFile != "" {
		clusterPath = req.ClusterFile
	}
	cl, err := config.LoadCluster(clusterPath)
	if err != nil {
		return nil, nil, err
	}
	// The launcher version comes from the cluster (backend+launcher), so a
	// simulated and a real sweep of one plan never share identities.
	opts := plan.Options{Sweep: sw, Cluster: cl, RecipesRoot: req.RecipesRoot, OnePointPerKey: req.OnePointPerKey, RecipeSets: req.RecipeSets}
	if req.Changelog != nil {
		if _, err := ApplyChangelog(*req.Changelog, sw, &opts); err != nil {
			return nil, nil, err
		}
	}
	p, err := plan.Build(opts)
	if err != nil {
		return nil, nil, err
	}
	// The changelog is provenance (the sweep's memo names its entries), not
	// an input of the plan: the seed entry and the seed sweep file plan one
	// sweep, with one ID and one stored plan.
	in := &workflows.SweepInput{
		Name: sw.Name, Cluster: cl.Name, TaskQueue: cl.TaskQueue, NodeBudget: cl.Nodes,
		Tuning: req.Tuning, ReuseFrom: req.ReuseFrom, Force: req.Force, Nightly: req.Nightly,
		SweepFile: AbsPath(req.SweepFile), ClusterFile: AbsPath(req.ClusterFile),
	}
	in.Points = plan.PointSpecs(p, cl, sw.Evals)
	if err := preflightRecipes(cl, p.RecipesRoot, in.Points); err != nil {
		return nil, nil, err
	}
	if err := ApplyFaults(req.Faults, in.Points); err != nil {
		return nil, nil, err
	}
	if err := ApplyAdaptive(in, p, sw, req.Adaptive); err != nil {
		return nil, nil, err
	}
	if req.Canary {
		ApplyCanaries(in, plan.DefaultNodeMinuteTimes(cl.BringUpTime))
	}
	in.SweepID = req.ID
	if in.SweepID == "" {
		in.SweepID = defaultSweepID(sw.Name, in)
	}
	return in, p, nil
}

// defaultSweepID is deterministic: the same plan gives the same ID, so a
// repeated `sweep start` attaches to the running sweep instead of
// duplicating it.
func defaultSweepID(name string, in *workflows.SweepInput, extra ...string) string {
	h := sha256.New()
	for _, e := range extra {
		fmt.Fprintln(h, e)
	}
	fps := make([]string, 0, len(in.Points))
	for _, p := range in.Points {
		fps = append(fps, p.Identity+"="+p.ProfileHash)
	}
	sort.Strings(fps)
	fmt.Fprintln(h, strings.Join(fps, ","), strings.Join(in.ReuseFrom, ","), strings.Join(in.Force, ","))
	for _, p := range in.Points {
		for _, f := range p.Faults {
			if f.Chaos != "" {
				fmt.Fprintln(h, p.PointID, f.Stage, f.Times, f.Chaos)
				continue
			}
			fmt.Fprintln(h, p.PointID, f.Stage, f.Times)
		}
	}
	// A canary run of a plan is another sweep than a plain one, and so is
	// a run with adaptive points.
	if len(in.Canaries) > 0 {
		fmt.Fprintln(h, "canary")
	}
	if len(in.Adaptive) > 0 {
		a, _ := json.Marshal(in.Adaptive)
		fmt.Fprintln(h, "adaptive", string(a))
	}
	return name + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// ApplyAdaptive puts the sweep file's adaptive requests, and those of
// flags (a flag's request replaces the file's for its config key), on the
// sweep input. Each must name a config key, and a topology, that the plan
// has; the points of those keys learn the concurrency their recipe claims
// (point.Spec.RecipeConc), above which nothing is added.
func ApplyAdaptive(in *workflows.SweepInput, p *plan.Plan, sw *config.Sweep, flags []point.Adaptive) error {
	type req struct {
		a     point.Adaptive
		where string
	}
	var reqs []req
	for i, a := range sw.Adaptive {
		where := strictyaml.DisplayPath(sw.Path) + ": adaptive"
		if i < len(sw.AdaptivePos) {
			where = fmt.Sprintf("%s: adaptive[%d]", sw.AdaptivePos[i], i)
		}
		reqs = append(reqs, req{a, where})
	}
	for _, a := range flags {
		if i := slices.IndexFunc(reqs, func(r req) bool { return r.a.ConfigKey == a.ConfigKey }); i >= 0 {
			reqs[i] = req{a, "--adaptive " + a.ConfigKey}
			continue
		}
		reqs = append(reqs, req{a, "--adaptive " + a.ConfigKey})
	}
	if len(reqs) == 0 {
		return nil
	}
	if len(in.Points) >= storedPlanPoints {
		return fmt.Errorf("%s: adaptive points need a plan of fewer than %d points (this one has %d: the sweep would load it page by page)",
			reqs[0].where, storedPlanPoints, len(in.Points))
	}
	claims := map[string]int{}
	for _, pt := range p.Points {
		if pt.Recipe != nil {
			claims[pt.ID] = checklist.ClaimedConc(pt.Recipe)
		}
	}
	for _, r := range reqs {
		var topologies []string
		for i := range in.Points {
			pt := &in.Points[i]
			if pt.ConfigKey != r.a.ConfigKey {
				continue
			}
			if !slices.Contains(topologies, pt.Topology) {
				topologies = append(topologies, pt.Topology)
			}
			pt.RecipeConc = claims[pt.PointID]
		}
		switch {
		case len(topologies) == 0:
			return fmt.Errorf("%s: config-key: %s has no point in the plan", r.where, r.a.ConfigKey)
		case r.a.Topology != "" && !slices.Contains(topologies, r.a.Topology):
			return fmt.Errorf("%s: topology: %s has no deployment of topology %q (it has %s)", r.where, r.a.ConfigKey, r.a.Topology, strings.Join(topologies, ", "))
		}
		in.Adaptive = append(in.Adaptive, r.a)
	}
	return nil
}

// AddedPoints are the points a sweep's adaptive searches added, from the
// ledger, as `starter check --added` checks them.
func AddedPoints(ctx context.Context, store *results.Store, sweepID string) ([]checklist.Added, error) {
	pts, err := store.Points(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("sweep %q has no points in the ledger", sweepID)
	}
	var out []checklist.Added
	for _, p := range pts {
		var spec point.Spec
		if len(p.SpecJSON) == 0 || json.Unmarshal(p.SpecJSON, &spec) != nil || spec.Added == nil {
			continue
		}
		out = append(out, checklist.Added{PointID: p.PointID, ConfigKey: spec.ConfigKey, Conc: spec.Conc, Row: spec.Row})
	}
	return out, nil
}

// ApplyCanaries makes in a canary sweep: every point gets its planned
// node-minutes on an allocation of its own (times.PointAlone: the cluster's
// bring-up time, the default warmup and eval, the perf duration of its
// row), and each image and backend its cheapest point as canary
// (point.PickCanaries).
func ApplyCanaries(in *workflows.SweepInput, times plan.NodeMinuteTimes) {
	for i := range in.Points {
		in.Points[i].NodeMinutes = times.PointAlone(in.Points[i])
	}
	in.Canaries = point.PickCanaries(in.Points, in.NodeBudget)
}

func AbsPath(p string) string {
	if p == "" {
		return ""
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// ApplyFaults reads --inject-fault POINT:STAGE[:TIMES] (POINT: a point ID,
// or a substring of exactly one) into the points' fault lists.
func ApplyFaults(specs []string, pts []point.Spec) error {
	ids := make([]string, len(pts))
	for i, pt := range pts {
		ids[i] = pt.PointID
	}
	faults, err := point.ParseFaults(specs, ids)
	if err != nil {
		return err
	}
	for i := range pts {
		pts[i].Faults = append(pts[i].Faults, faults[pts[i].PointID]...)
	}
	return nil
}

// preflightRecipes renders every recipe of a sweep that launches recipes
// (the slurm backend), from the root the plan read, once per mode it will
// run in, so a recipe the launcher refuses stops the sweep here, not after
// its nodes are held.
func preflightRecipes(cl *config.Cluster, root string, pts []point.Spec) error {
	if cl.Backend != config.BackendSlurm {
		return nil
	}
	done := map[string]bool{}
	for _, p := range pts {
		key := fmt.Sprintf("%s@%g", p.RecipePath, p.SyntheticAL)
		if done[key] {
			continue
		}
		done[key] = true
		if err := preflightRecipe(cl, root, p, ", nothing was started"); err != nil {
			return err
		}
	}
	return nil
}

// preflightRecipe renders one point's recipe as the launcher will; what
// the refusal means for the caller follows "does not launch on CLUSTER".
func preflightRecipe(cl *config.Cluster, root string, p point.Spec, meaning string) error {
	r, err := config.LoadRecipe(root, p.RecipePath, p.RecipeSets...)
	if err != nil {
		return err
	}
	name := filepath.Base(r.ModelDir(cl))
	if err := srtlaunch.Preflight(r, cl.GPUsPerNode, name, p.SyntheticAL); err != nil {
		return fmt.Errorf("%s: recipe %s does not launch on %s%s: %v", p.ExpName, p.RecipePath, cl.Name, meaning, err)
	}
	return nil
}

// HealthBudgets plans a sweep file and checks each deployment's
// health_check budget against the bring-ups the ledger holds for it
// (budgetcheck.DefaultMargin).
func HealthBudgets(ctx context.Context, store *results.Store, sweepFile, clusterFile string) ([]budgetcheck.Warning, error) {
	_, p, err := Build(Request{SweepFile: sweepFile, ClusterFile: clusterFile})
	if err != nil {
		return nil, err
	}
	return budgetcheck.Check(ctx, store, p, budgetcheck.DefaultMargin)
}
