package forecast

import (
	"fmt"
	"slices"
	"time"

	"github.com/sweepflow/sweepflow/point"
)

// Finding kinds: why points are not in a forecast. They cost nothing.
const (
	FindingNotServed  = "not-served"      // no profile serves the key's runner
	FindingNoPlan     = "does-not-plan"   // the key does not plan (recipe missing, runner unknown, ...)
	FindingCheck      = "fails-check"     // `starter check` fails the key
	FindingNoRender   = "does-not-render" // a recipe the launcher refuses
	FindingNoDuration = "no-duration"     // nothing says how long a stage takes
)

// Finding is a config key (or some of its points) the forecast leaves
// out, with a one-line reason.
type Finding struct {
	Kind   string `json:"kind"`
	Key    string `json:"config_key"`
	Points int    `json:"points,omitempty"` // the points it would have run, when it plans
	Reason string `json:"reason"`
}

// Cluster is the forecast of what one cluster runs.
type Cluster struct {
	Name         string `json:"cluster"`
	Nodes        int    `json:"nodes"`
	GPUsPerNode  int    `json:"gpus_per_node"`
	Points       int    `json:"points"`
	Deployments  int    `json:"deployments"`
	BringUps     int    `json:"bring_ups"`
	EvalRestarts int    `json:"eval_restarts"`
	// Node-hours and GPU-hours held, in total and by stage kind (bring-up,
	// warmup, perf, eval-restart, eval, teardown). GPU-hours count every
	// GPU of a held node.
	NodeHours        float64            `json:"node_hours"`
	GPUHours         float64            `json:"gpu_hours"`
	NodeHoursByStage map[string]float64 `json:"node_hours_by_stage"`
	GPUHoursByStage  map[string]float64 `json:"gpu_hours_by_stage"`
	// MakespanHours is when the last point ends; the lower bound is
	// max(longest deployment, node-hours / nodes).
	MakespanHours          float64 `json:"makespan_hours"`
	LowerBoundHours        float64 `json:"lower_bound_hours"`
	LongestDeploymentHours float64 `json:"longest_deployment_hours"`
	NodeBoundHours         float64 `json:"node_bound_hours"`
	Ratio                  float64 `json:"makespan_to_lower_bound"`
	// CriticalPath is the chain of deployments that decides the makespan:
	// each started when the one before it ended and released its nodes.
	CriticalPath []Step    `json:"critical_path"`
	Sources      []Source  `json:"sources"`
	NotForecast  []Finding `json:"not_forecast"`
	Notes        []string  `json:"notes,omitempty"`
	// MeasuredDeployments counts the deployments whose stage times came
	// from the ledger.
	MeasuredDeployments int `json:"measured_deployments"`
	// FinishOrder is the point IDs in the order the simulated sweep
	// finished them.
	FinishOrder []string `json:"finish_order"`
	// Canary is the same sweep with canaries (`sweep start --canary`) set
	// against it without: what the canaries cost and how much later the
	// sweep ends (CompareCanaries).
	Canary *Canary `json:"canary,omitempty"`
	// Adaptive is the worst case of the sweep's adaptive points, whose
	// figures the cluster's include (CompareAdaptive).
	Adaptive *Adaptive `json:"adaptive,omitempty"`
	Timeline *Timeline `json:"-"`
}

// Brief is a forecast's headline figures, as a message carries them.
type Brief struct {
	Cluster             string  `json:"cluster"`
	Points              int     `json:"points"`
	Deployments         int     `json:"deployments"`
	NodeHours           float64 `json:"node_hours"`
	GPUHours            float64 `json:"gpu_hours"`
	MakespanHours       float64 `json:"makespan_hours"`
	LowerBoundHours     float64 `json:"lower_bound_hours"`
	CriticalPath        []Step  `json:"critical_path"`
	MeasuredDeployments int     `json:"measured_deployments"`
}

// Brief is the forecast's headline figures.
func (c *Cluster) Brief() Brief {
	return Brief{Cluster: c.Name, Points: c.Points, Deployments: c.Deployments, NodeHours: c.NodeHours, GPUHours: c.GPUHours,
		MakespanHours: c.MakespanHours, LowerBoundHours: c.LowerBoundHours, CriticalPath: c.CriticalPath, MeasuredDeployments: c.MeasuredDeployments}
}

// Step is one deployment on the critical path.
type Step struct {
	Deployment string `json:"deployment"` // B<n>: its number in plan order
	// Canary: the step is a canary, run on an allocation of its own before
	// the rest of its deployment (Concs holds its concurrency alone).
	Canary     bool    `json:"canary,omitempty"`
	ConfigKey  string  `json:"config_key"`
	Topology   string  `json:"topology"`
	Nodes      int     `json:"nodes"`
	Concs      []int   `json:"concs"`
	StartHours float64 `json:"start_hours"`
	EndHours   float64 `json:"end_hours"`
}

// NewCluster is the empty forecast of a cluster with profile prof, on
// nodeBudget nodes when the profile names none.
func NewCluster(prof Profile, nodeBudget int) *Cluster {
	c := &Cluster{Name: prof.Name, Nodes: prof.Nodes, GPUsPerNode: prof.GPUsPerNode,
		NodeHoursByStage: map[string]float64{}, GPUHoursByStage: map[string]float64{}, NotForecast: []Finding{},
		CriticalPath: []Step{}, FinishOrder: []string{}, Sources: []Source{}}
	for _, k := range Kinds {
		c.NodeHoursByStage[k], c.GPUHoursByStage[k] = 0, 0
	}
	if c.Nodes == 0 {
		c.Nodes = nodeBudget
	}
	return c
}

// Summarize sums what the simulated sweep tl held, and says where each
// stage time came from (clk) and how many deployments the ledger measured.
func (c *Cluster) Summarize(pts []point.Spec, canaries map[string]bool, inputs Inputs, clk *StageClock, tl *Timeline) {
	for key := range clk.times {
		if _, ok := inputs.Measured[key]; ok {
			c.MeasuredDeployments++
		}
	}
	c.Sources = clk.sources(tl)
	c.summarize(pts, canaries, tl)
}

// deployment is one deployment's span in the simulated sweep.
type deployment struct {
	step       Step
	group      string // point.CanaryKey of its points
	start, end time.Time
	seen       bool
}

// span is the key of the span a point's stages fall in: its deployment's,
// or a canary's own (it runs on an allocation of its own, before the rest
// of its deployment).
func span(p point.Spec, canaries map[string]bool) string {
	if canaries[p.PointID] {
		return "canary:" + p.PointID
	}
	return p.DeploymentKey()
}

func (c *Cluster) summarize(pts []point.Spec, canaries map[string]bool, tl *Timeline) {
	c.Timeline = tl
	c.Points = len(pts)
	c.FinishOrder = append(c.FinishOrder, tl.Finished...)
	// Deployments are numbered in plan order; a canary keeps its
	// deployment's number.
	number := map[string]int{}
	for _, p := range pts {
		if key := p.DeploymentKey(); number[key] == 0 {
			number[key] = len(number) + 1
		}
	}
	c.Deployments = len(number)
	deps := map[string]*deployment{}
	var order []string
	for _, p := range pts {
		key := span(p, canaries)
		d := deps[key]
		if d == nil {
			d = &deployment{step: Step{Deployment: fmt.Sprintf("B%d", number[p.DeploymentKey()]), Canary: canaries[p.PointID],
				ConfigKey: p.ConfigKey, Topology: p.Topology}}
			d.group = point.CanaryKey(p)
			deps[key] = d
			order = append(order, key)
		}
		d.step.Nodes = max(d.step.Nodes, p.Nodes)
		d.step.Concs = append(d.step.Concs, p.Conc)
	}
	hours := func(d time.Duration) float64 { return d.Hours() }
	nodeTime := map[string]time.Duration{}
	for _, e := range tl.Events {
		if e.Kind == "" {
			continue
		}
		d := deps[span(e.Point, canaries)]
		if d != nil {
			if !d.seen || e.Start.Before(d.start) {
				d.start = e.Start
			}
			if !d.seen || e.End.After(d.end) {
				d.end = e.End
			}
			d.seen = true
		}
		switch {
		case e.Kind == KindBringUp && e.Activity == "BringUp":
			c.BringUps++
		case e.Kind == KindEvalRestart:
			c.EvalRestarts++
		}
		if e.Kind == KindQueue {
			continue // no node is held yet
		}
		// Summed exactly (node x duration), converted once.
		nodeTime[e.Kind] += time.Duration(e.Point.Nodes) * e.End.Sub(e.Start)
	}
	var total time.Duration
	for k, nt := range nodeTime {
		c.NodeHoursByStage[k] = hours(nt)
		c.GPUHoursByStage[k] = hours(nt) * float64(c.GPUsPerNode)
		total += nt
	}
	c.NodeHours, c.GPUHours = hours(total), hours(total)*float64(c.GPUsPerNode)
	c.MakespanHours = hours(tl.End.Sub(tl.Start))
	var longest time.Duration
	for _, key := range order {
		d := deps[key]
		d.step.StartHours, d.step.EndHours = hours(d.start.Sub(tl.Start)), hours(d.end.Sub(tl.Start))
		longest = max(longest, d.end.Sub(d.start))
	}
	c.LongestDeploymentHours = hours(longest)
	if c.Nodes > 0 {
		c.NodeBoundHours = c.NodeHours / float64(c.Nodes)
	}
	c.LowerBoundHours = max(c.LongestDeploymentHours, c.NodeBoundHours)
	if c.LowerBoundHours > 0 {
		c.Ratio = c.MakespanHours / c.LowerBoundHours
	}
	c.CriticalPath = criticalPath(order, deps, tl.Start)
}

// criticalPath walks back from the deployment that ends last: each
// deployment on it started when an earlier one ended (the sweep starts
// queued deployments only when nodes are released, or, in a canary
// sweep, when their group's canary passed), back to one that started with
// the sweep. Of several that ended at that instant, the canary of its
// group held it; else the largest released the nodes that mattered.
func criticalPath(order []string, deps map[string]*deployment, start time.Time) []Step {
	var last *deployment
	for _, key := range order {
		if d := deps[key]; d.seen && (last == nil || d.end.After(last.end)) {
			last = d
		}
	}
	var path []Step
	for d := last; d != nil; {
		path = append(path, d.step)
		if !d.start.After(start) {
			break
		}
		var prev *deployment
		for _, key := range order {
			e := deps[key]
			if !e.seen || e == d || !e.end.Equal(d.start) {
				continue
			}
			holds := func(x *deployment) bool { return x.step.Canary && !d.step.Canary && x.group == d.group }
			if prev == nil || holds(e) && !holds(prev) || holds(e) == holds(prev) && e.step.Nodes > prev.step.Nodes {
				prev = e
			}
		}
		d = prev
	}
	slices.Reverse(path)
	return path
}
