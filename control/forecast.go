package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// ForecastRequest says what `starter forecast` forecasts: a sweep (a file,
// or config files and keys), optionally narrowed to perf-changelog
// entries, on one or more cluster profiles.
type ForecastRequest struct {
	Sweep     *config.Sweep
	Changelog *ChangelogRef
	// Clusters are profile paths; empty: the sweep's cluster.
	Clusters    []string
	RecipesRoot string
	Assumptions forecast.Assumptions
	// Ledger, when set, replaces assumptions by the stage times it
	// measured for the same deployments (--from-ledger).
	Ledger *results.Store
	// StandInRecipes says the recipes only size the deployments (written
	// from the rows, `bench forecast --sized`): the launcher's render of
	// them is not asked, it would refuse what they leave out.
	StandInRecipes bool
	// OnePointPerKey forecasts one point per config key, as `sweep start
	// --one-point-per-key` plans it.
	OnePointPerKey bool
	// Canary makes the sweep with canaries (`sweep start --canary`) the
	// headline; either way each cluster's forecast carries the comparison.
	Canary bool
}

// Forecast plans what a sweep start would run on each cluster, as a start
// would (each key on the first profile that serves its runner), and
// forecasts it with the real sweep workflow in virtual time. What would
// not run is reported with its reason instead of failing the forecast:
// keys no profile serves, keys that do not plan, keys `starter check`
// fails and recipes the launcher refuses.
func Forecast(ctx context.Context, req ForecastRequest) (*forecast.Report, error) {
	if err := req.Assumptions.Validate(); err != nil {
		return nil, err
	}
	sw := *req.Sweep
	paths := req.Clusters
	if len(paths) == 0 && sw.ClusterPath != "" {
		paths = []string{sw.ClusterPath}
	}
	if len(paths) == 0 {
		return nil, errors.New("no cluster profile: give --cluster FILE or set cluster in the sweep file")
	}
	clusters := make([]*config.Cluster, len(paths))
	for i, p := range paths {
		cl, err := config.LoadCluster(p)
		if err != nil {
			return nil, err
		}
		clusters[i] = cl
	}
	rep := &forecast.Report{Sweep: sw.Name, Assumptions: req.Assumptions, FromLedger: req.Ledger != nil, NotServed: []forecast.Finding{}}
	// The changelog's entries pick keys, scenarios and evals once.
	var filters plan.Options
	if req.Changelog != nil {
		sel, err := ApplyChangelog(*req.Changelog, &sw, &filters)
		if err != nil {
			return nil, err
		}
		for _, l := range sel.Describe() {
			rep.Notes = append(rep.Notes, "changelog "+l)
		}
	}
	master, err := ixconfig.LoadMaster(sw.ConfigFiles...)
	if err != nil {
		return nil, err
	}
	keys, err := matrix.ResolveKeys(master, sw.ConfigKeys)
	if err != nil {
		return nil, err
	}
	served := make([][]string, len(clusters))
	for _, key := range keys {
		runner := master.Entry(key).Runner
		i := slices.IndexFunc(clusters, func(c *config.Cluster) bool { return c.ServesRunner(runner) })
		if i < 0 {
			rep.NotServed = append(rep.NotServed, forecast.Finding{Kind: forecast.FindingNotServed, Key: key,
				Reason: fmt.Sprintf("runner %s: no given profile serves it", runner)})
			continue
		}
		served[i] = append(served[i], key)
	}
	for i, cl := range clusters {
		c, err := forecastCluster(ctx, req, sw, filters, cl, served[i])
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		rep.Clusters = append(rep.Clusters, c)
	}
	return rep, nil
}

// forecastCluster plans the keys a cluster serves, leaves out what would
// not run, and forecasts the rest.
func forecastCluster(ctx context.Context, req ForecastRequest, sw config.Sweep, filters plan.Options, cl *config.Cluster, keys []string) (*forecast.Cluster, error) {
	var findings []forecast.Finding
	opts := filters
	opts.Cluster, opts.RecipesRoot, opts.OnePointPerKey = cl, req.RecipesRoot, req.OnePointPerKey
	build := func(keys []string) (*plan.Plan, error) {
		s := sw
		s.ConfigKeys, s.ClusterPath = keys, cl.Path
		o := opts
		o.Sweep = &s
		return plan.Build(o)
	}
	// Whole first; key by key only to say which keys do not plan and why.
	var p *plan.Plan
	if len(keys) > 0 {
		var err error
		if p, err = build(keys); err != nil {
			var good []string
			for _, key := range keys {
				if _, err := build([]string{key}); err != nil {
					findings = append(findings, forecast.Finding{Kind: forecast.FindingNoPlan, Key: key, Reason: errtext.FirstLine(err)})
					continue
				}
				good = append(good, key)
			}
			p = nil
			if len(good) > 0 {
				if p, err = build(good); err != nil {
					return nil, err
				}
			}
		}
	}
	var pts []point.Spec
	var health map[string]time.Duration
	var notes []string
	if p != nil {
		// Keys `starter check` fails do not start.
		var failing map[string]forecast.Finding
		failing, notes = checkKeys(sw, cl, p)
		if len(failing) > 0 {
			var good []string
			for _, key := range uniqueKeys(p) {
				if f, ok := failing[key]; ok {
					f.Points = countKey(p, key)
					findings = append(findings, f)
					continue
				}
				good = append(good, key)
			}
			p = nil
			if len(good) > 0 {
				var err error
				if p, err = build(good); err != nil {
					return nil, err
				}
			}
		}
	}
	if p != nil {
		pts = plan.PointSpecs(p, cl, sw.Evals)
		// Recipes the launcher refuses do not start either.
		if !req.StandInRecipes {
			pts, findings = renderable(cl, p.RecipesRoot, pts, findings)
		}
		health = map[string]time.Duration{}
		for _, pt := range p.Points {
			if pt.Recipe != nil && pt.DeploymentHash != "" {
				health[pt.DeploymentHash] = pt.Recipe.HealthCheck.Timeout()
			}
		}
	}
	inputs := forecast.Inputs{Profile: forecast.Profile{Name: cl.Name, Nodes: cl.Nodes, GPUsPerNode: cl.GPUsPerNode, BringUp: cl.BringUpTime, Path: cl.Path},
		Assumptions: req.Assumptions, HealthBound: health}
	if req.Ledger != nil && len(pts) > 0 {
		var deps []string
		for _, pt := range pts {
			if k := pt.DeploymentKey(); !slices.Contains(deps, k) {
				deps = append(deps, k)
			}
		}
		m, err := forecast.FromLedger(ctx, req.Ledger, deps)
		if err != nil {
			return nil, err
		}
		inputs.Measured = m
	}
	in := workflows.SweepInput{SweepID: "forecast-" + sw.Name, Name: sw.Name, Cluster: cl.Name, TaskQueue: cl.TaskQueue,
		NodeBudget: cl.Nodes, Points: pts}
	plain := in
	if p != nil && len(sw.Adaptive) > 0 {
		// The sweep's adaptive points at worst: every budget spent.
		ain := in
		ain.Points = slices.Clone(in.Points)
		asw := sw
		asw.Adaptive, asw.AdaptivePos = nil, nil
		for _, a := range sw.Adaptive {
			if slices.ContainsFunc(pts, func(pt point.Spec) bool { return pt.ConfigKey == a.ConfigKey }) {
				asw.Adaptive = append(asw.Adaptive, a)
			}
		}
		if err := ApplyAdaptive(&ain, p, &asw, nil); err != nil {
			notes = append(notes, "adaptive points not forecast: "+errtext.FirstLine(err))
		} else {
			for i := range ain.Adaptive {
				ain.Adaptive[i].WorstCase = true
			}
			in = ain
		}
	}
	c, err := runner.Run(in, inputs)
	if err != nil {
		return nil, err
	}
	if len(in.Adaptive) > 0 {
		pc, err := runner.Run(plain, inputs)
		if err != nil {
			return nil, fmt.Errorf("without adaptive points: %w", err)
		}
		c = forecast.CompareAdaptive(pc, c)
	}
	if len(pts) > 0 {
		// The same sweep as `sweep start --canary` starts it.
		cin := in
		cin.Points = slices.Clone(in.Points)
		ApplyCanaries(&cin, plan.DefaultNodeMinuteTimes(cl.BringUpTime))
		cc, err := runner.Run(cin, inputs)
		if err != nil {
			return nil, fmt.Errorf("with canaries: %w", err)
		}
		c = forecast.CompareCanaries(c, cc, cin.Canaries, req.Canary)
	}
	if findings != nil {
		c.NotForecast = findings
	}
	c.Notes = notes
	return c, nil
}

// checkKeys runs `starter check` over a cluster's plan: the keys with a
// failing finding, each with its first one; a note when it could not run.
func checkKeys(sw config.Sweep, cl *config.Cluster, p *plan.Plan) (map[string]forecast.Finding, []string) {
	s := sw
	s.ConfigKeys = uniqueKeys(p)
	o := checklist.Options{Thinking: true, RecipesRoot: p.RecipesRoot}
	if err := o.FromSweep(&s, cl.Path, false); err != nil {
		return nil, []string{"starter check did not run: " + errtext.FirstLine(err)}
	}
	rep, err := checklist.Check(o)
	if err != nil {
		return nil, []string{"starter check did not run: " + errtext.FirstLine(err)}
	}
	out := map[string]forecast.Finding{}
	more := map[string]int{}
	for _, f := range rep.Findings {
		if f.Allowed || f.ConfigKey == "" {
			continue
		}
		if _, ok := out[f.ConfigKey]; ok {
			more[f.ConfigKey]++
			continue
		}
		out[f.ConfigKey] = forecast.Finding{Kind: forecast.FindingCheck, Key: f.ConfigKey, Reason: f.String()}
	}
	for k, n := range more {
		f := out[k]
		f.Reason += fmt.Sprintf(" (and %d more finding%s)", n, map[bool]string{true: "", false: "s"}[n == 1])
		out[k] = f
	}
	return out, nil
}

// renderable drops the points whose recipe the launcher refuses on a
// Slurm cluster, with a finding per recipe.
func renderable(cl *config.Cluster, root string, pts []point.Spec, findings []forecast.Finding) ([]point.Spec, []forecast.Finding) {
	if cl.Backend != config.BackendSlurm {
		return pts, findings
	}
	refused := map[string]error{}
	checked := map[string]bool{}
	for _, p := range pts {
		key := fmt.Sprintf("%s@%g", p.RecipePath, p.SyntheticAL)
		if checked[key] {
			continue
		}
		checked[key] = true
		if err := preflightRecipe(cl, root, p, ""); err != nil {
			refused[key] = err
		}
	}
	if len(refused) == 0 {
		return pts, findings
	}
	var keep []point.Spec
	at := map[string]int{}
	for _, p := range pts {
		key := fmt.Sprintf("%s@%g", p.RecipePath, p.SyntheticAL)
		err, bad := refused[key]
		if !bad {
			keep = append(keep, p)
			continue
		}
		if i, ok := at[key]; ok {
			findings[i].Points++
			continue
		}
		at[key] = len(findings)
		findings = append(findings, forecast.Finding{Kind: forecast.FindingNoRender, Key: p.ConfigKey, Points: 1, Reason: errtext.FirstLine(err)})
	}
	return keep, findings
}

func uniqueKeys(p *plan.Plan) []string {
	var out []string
	for _, pt := range p.Points {
		if !slices.Contains(out, pt.ConfigKey) {
			out = append(out, pt.ConfigKey)
		}
	}
	return out
}

func countKey(p *plan.Plan, key string) int {
	n := 0
	for _, pt := range p.Points {
		if pt.ConfigKey == key {
			n++
		}
	}
	return n
}

// ForecastStored forecasts a sweep the ledger holds the plan of (`starter
// report` sets it against what the sweep took): its points and node budget
// as started, the bring-up time of the cluster profile it was started
// with, and the assumptions a.
func ForecastStored(ctx context.Context, store *results.Store, sweepID string, a forecast.Assumptions) (*forecast.Cluster, error) {
	in, files, ok, err := StoredPlan(ctx, store, sweepID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the ledger holds no plan of sweep %s", sweepID)
	}
	prof := forecast.Profile{Name: in.Cluster, Nodes: in.NodeBudget}
	for _, f := range files {
		if f.Role != "cluster" {
			continue
		}
		cl, err := config.ParseCluster(f.Path, f.Path, f.Content)
		if err != nil {
			return nil, fmt.Errorf("sweep %s: its stored cluster profile: %w", sweepID, err)
		}
		prof.GPUsPerNode, prof.BringUp, prof.Path = cl.GPUsPerNode, cl.BringUpTime, f.Path
	}
	if in.PlanRef != "" && len(in.Points) == 0 {
		return nil, fmt.Errorf("sweep %s: its stored plan holds no points", sweepID)
	}
	return runner.Run(*in, forecast.Inputs{Profile: prof, Assumptions: a})
}
