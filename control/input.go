package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
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
	// RecipeSets are --set overrides for every recipe (plan.Options).
	RecipeSets []string
}

// Build plans the sweep file and converts every point into the
// workflow's input. Any invalid input fails here, before a GPU is touched.
func Build(req Request) (*workflows.SweepInput, *plan.Plan, error) {
	sw, err := config.LoadSweep(req.SweepFile)
	if err != nil {
		return nil, nil, err
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
func defaultSweepID(name string, in *workflows.SweepInput) string {
	h := sha256.New()
	fps := make([]string, 0, len(in.Points))
	for _, p := range in.Points {
		fps = append(fps, p.Identity+"="+p.ProfileHash)
	}
	sort.Strings(fps)
	fmt.Fprintln(h, strings.Join(fps, ","), strings.Join(in.ReuseFrom, ","), strings.Join(in.Force, ","))
	for _, p := range in.Points {
		for _, f := range p.Faults {
			fmt.Fprintln(h, p.PointID, f.Stage, f.Times)
		}
	}
	// A canary run of a plan is another sweep than a plain one.
	if len(in.Canaries) > 0 {
		fmt.Fprintln(h, "canary")
	}
	return name + "-" + hex.EncodeToString(h.Sum(nil))[:8]
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
