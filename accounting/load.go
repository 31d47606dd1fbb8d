package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// Filter selects the ledger's points. Empty fields select everything.
type Filter struct {
	Sweep     string
	Cluster   string // the cluster profile's file name without extension (local-sim)
	ConfigKey string
	Since     time.Time // sweeps started at or after
}

// ErrNoSweep: the named sweep has no rows in the ledger.
var ErrNoSweep = fmt.Errorf("no such sweep")

// Load reads the points the filter selects, with their stage runs,
// failures, attempts, stored figures and the cost of their reused outputs. It also
// returns the sweeps it read.
func Load(ctx context.Context, s *results.Store, f Filter) ([]Point, []string, error) {
	var sweeps []results.Sweep
	found := true
	if f.Sweep != "" {
		sw, ok, err := s.GetSweep(ctx, f.Sweep)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			sw, found = results.Sweep{ID: f.Sweep}, false
		}
		sweeps = []results.Sweep{sw}
	} else {
		all, err := s.Sweeps(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, sw := range all {
			if f.Since.IsZero() || !sw.StartedAt.Before(f.Since) {
				sweeps = append(sweeps, sw)
			}
		}
	}
	var out []Point
	var ids []string
	l := loader{s: s, costs: map[[3]string]NodeTime{}}
	for _, sw := range sweeps {
		if !f.Since.IsZero() && sw.StartedAt.Before(f.Since) {
			continue
		}
		cluster, err := clusterOf(ctx, s, sw.ID)
		if err != nil {
			return nil, nil, err
		}
		if f.Cluster != "" && cluster != f.Cluster {
			continue
		}
		ps, err := l.sweep(ctx, sw.ID, cluster, f.ConfigKey)
		if err != nil {
			return nil, nil, err
		}
		if len(ps) == 0 && !found {
			return nil, nil, fmt.Errorf("%w: %q has no rows in the results store", ErrNoSweep, f.Sweep)
		}
		out = append(out, ps...)
		ids = append(ids, sw.ID)
	}
	return out, ids, nil
}

// clusterOf names a sweep's cluster by its cluster profile's file name
// (the plan's file with role "cluster"); "" when the ledger has no plan.
func clusterOf(ctx context.Context, s *results.Store, sweepID string) (string, error) {
	plan, ok, err := s.GetSweepPlan(ctx, sweepID)
	if err != nil || !ok {
		return "", err
	}
	for _, f := range plan.Files {
		if f.Role == "cluster" {
			base := filepath.Base(f.Path)
			return strings.TrimSuffix(base, filepath.Ext(base)), nil
		}
	}
	return "", nil
}

type loader struct {
	s *results.Store
	// costs caches what a stage of an identity cost in a source sweep.
	costs map[[3]string]NodeTime
}

func (l *loader) sweep(ctx context.Context, sweepID, cluster, configKey string) ([]Point, error) {
	rows, err := l.s.Points(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	runs, err := l.s.StageRuns(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	fails, err := l.s.StageFailures(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	atts, err := l.s.Attempts(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	attemptsOf := map[string][]results.StageAttempt{}
	for _, a := range atts {
		attemptsOf[a.PointID] = append(attemptsOf[a.PointID], a)
	}
	perf, err := l.s.Perf(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	evals, err := l.s.Evals(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	type key struct {
		point string
		seq   int
	}
	byRun := map[key]int{}
	byPoint := map[string][]results.StageRun{}
	for _, r := range runs {
		byPoint[r.PointID] = append(byPoint[r.PointID], r)
		byRun[key{r.PointID, r.Seq}] = len(byPoint[r.PointID]) - 1
	}
	for _, f := range fails {
		if i, ok := byRun[key{f.PointID, f.Seq}]; ok {
			byPoint[f.PointID][i].Failures = append(byPoint[f.PointID][i].Failures, f.Attempt)
		}
	}
	perfStored, evalStored := map[string]bool{}, map[string]bool{}
	for _, r := range perf {
		if r.SourceSweep == "" {
			perfStored[r.Identity] = true
		}
	}
	for _, r := range evals {
		if r.SourceSweep == "" {
			evalStored[r.Identity] = true
		}
	}
	var out []Point
	for _, row := range rows {
		if configKey != "" && row.ConfigKey != configKey {
			continue
		}
		p := Point{SweepID: sweepID, PointID: row.PointID, Identity: row.Identity, ConfigKey: row.ConfigKey, Cluster: cluster,
			Runs: byPoint[row.PointID], Attempts: attemptsOf[row.PointID], PerfStored: perfStored[row.Identity], EvalStored: evalStored[row.Identity]}
		p.Deployment, p.Nodes, p.Added = specOf(row)
		for _, r := range p.Runs {
			if r.Outcome != point.OutcomeReused {
				continue
			}
			if cost, ok, err := l.reusedCost(ctx, sweepID, row.Identity, r.Stage); err != nil {
				return nil, err
			} else if ok {
				if p.ReusedCost == nil {
					p.ReusedCost = map[string]NodeTime{}
				}
				p.ReusedCost[r.Stage] = cost
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// specOf reads the deployment hash, node count and whether an adaptive
// search added the point from its spec; the identity ("<hash>-c<conc>")
// gives the hash of older rows.
func specOf(row results.Point) (string, int, bool) {
	var spec point.Spec
	if len(row.SpecJSON) > 0 {
		_ = json.Unmarshal(row.SpecJSON, &spec) // a bad spec leaves the identity's hash and no nodes
	}
	spec.Identity = row.Identity
	dep := spec.Deployment()
	return dep, spec.Nodes, spec.Added != nil
}

// reusedCost is what the stage of the identity cost where the reused
// output was measured: the node time of the stage's last ok run there.
func (l *loader) reusedCost(ctx context.Context, sweepID, identity, stage string) (NodeTime, bool, error) {
	out, ok, err := l.s.StageOutput(ctx, sweepID, identity, stage)
	if err != nil || !ok || out.SourceSweep == "" {
		return 0, false, err
	}
	k := [3]string{out.SourceSweep, identity, stage}
	if c, ok := l.costs[k]; ok {
		return c, c >= 0, nil
	}
	l.costs[k] = -1
	rows, err := l.s.Points(ctx, out.SourceSweep)
	if err != nil {
		return 0, false, err
	}
	runs, err := l.s.StageRuns(ctx, out.SourceSweep)
	if err != nil {
		return 0, false, err
	}
	for _, row := range rows {
		if row.Identity != identity {
			continue
		}
		_, nodes, _ := specOf(row)
		for _, r := range runs {
			if r.PointID == row.PointID && r.Stage == stage && r.Outcome == point.OutcomeOK && r.Duration() > 0 {
				l.costs[k] = nodeTime(nodes, r.Duration())
			}
		}
	}
	c := l.costs[k]
	return c, c >= 0, nil
}

// ParseSince reads --since: an RFC 3339 time, a date (2026-12-01, UTC), or
// a duration back from now (168h, or 7d for days).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err == nil && days >= 0 && fmt.Sprint(days) == n {
			return now.AddDate(0, 0, -days), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time, a date (2006-01-02) or a duration back from now (168h, 7d)", s)
}
