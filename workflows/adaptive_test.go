package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/point"
)

// linearE2EL is a server whose decode step grows with the batch: median
// E2EL a + b*conc seconds, interactivity 1000/E2EL.
func linearE2EL(a, b float64) func(point.Spec) point.PerfSummary {
	return func(p point.Spec) point.PerfSummary {
		e2el := a + b*float64(p.Conc)
		return point.PerfSummary{E2ELMedianMs: e2el * 1000, Interactivity: 1000 / e2el, TTFTp99Ms: 100 * e2el}
	}
}

// deploymentPoints are the planned points of one deployment of key k, the
// highest concurrency with the eval, as the planner gives them (agentic
// rows, so AtConc has a row to rewrite).
func deploymentPoints(dep, topo string, nodes, recipeConc int, concs ...int) []point.Spec {
	var out []point.Spec
	for i, c := range concs {
		exp := fmt.Sprintf("dsv4_%s_conc%d_kvdram", dep, c)
		row, _ := json.Marshal(map[string]any{"conc": []int{c}, "exp-name": exp})
		id := point.Identity{DeploymentHash: dep, Conc: c}
		out = append(out, point.Spec{PointID: point.ID(exp, id), ExpName: exp, ConfigKey: "k", Topology: topo, Conc: c, Nodes: nodes,
			Eval: i == len(concs)-1, SyntheticAL: 3.77, Identity: id.String(), DeploymentHash: dep, RecipeConc: recipeConc,
			DurationSec: 3600, Row: row, BaselineKey: "base-" + dep + "-c" + fmt.Sprint(c)})
	}
	return out
}

// runSweepInput runs in with the test defaults (sweep s, queue q, 18 nodes).
func runSweepInput(t *testing.T, f *groupFake, in SweepInput) *SweepProgress {
	t.Helper()
	in.SweepID, in.TaskQueue, in.Tuning = "s", "q", fastTuning
	if in.NodeBudget == 0 {
		in.NodeBudget = 18
	}
	return runGroupSweepInput(t, f, in)
}

func addedRows(pr *SweepProgress) []PointProgress {
	var out []PointProgress
	for _, p := range pr.Points {
		if p.Added != nil {
			out = append(out, p)
		}
	}
	return out
}

// measuredCurve is the curve of every point of the sweep with figures.
func measuredCurve(pr *SweepProgress) curvegaps.Curve {
	c := curvegaps.Curve{Key: "k"}
	for _, p := range pr.Points {
		if p.Outcome != nil && p.Outcome.State != nil && p.Outcome.State.Perf != nil {
			perf := p.Outcome.State.Perf
			c.Points = append(c.Points, curvegaps.Point{Conc: p.Conc, E2ELSeconds: perf.E2ELMedianMs / 1000, Interactivity: perf.Interactivity})
		}
	}
	return c
}

// TestAdaptiveFillOnTheDeploymentsServer: a deployment whose two planned
// points leave a hole (20 s -> 100 s of median E2EL) gets the points fill
// decides, on the server it already brought up: the same allocations and
// bring-ups as the plan without them, the eval after every perf run, and
// no gap wider than the factor at the end.
func TestAdaptiveFillOnTheDeploymentsServer(t *testing.T) {
	pts := deploymentPoints("twop1d", "2P1D DEP16/DEP32", 16, 1280, 90, 700)
	model := linearE2EL(8, 0.132)

	plain := newGroupFake()
	plain.model = model
	base := runSweepInput(t, plain, SweepInput{Points: pts})
	require.Equal(t, 2, base.Counts[point.StatusCompleted])
	require.NotEmpty(t, curvegapsOf(t, measuredCurve(base)), "the plan leaves a hole")

	f := newGroupFake()
	f.model = model
	pr := runSweepInput(t, f, SweepInput{Points: pts, Adaptive: []point.Adaptive{{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}}})
	added := addedRows(pr)
	require.NotEmpty(t, added)
	require.LessOrEqual(t, len(added), 3)
	require.Equal(t, 2+len(added), pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Empty(t, curvegapsOf(t, measuredCurve(pr)), "no gap wider than x2 left")

	// Same allocations and bring-ups as without the added points.
	for _, c := range []string{"allocate", "bringup:perf", "bringup:eval", "teardown"} {
		require.Equal(t, plain.calls[c], f.calls[c], c)
	}
	require.Equal(t, 1, f.calls["bringup:perf"])
	// The added perf runs come after the planned ones and before the eval.
	evalAt := indexOf(f.order, "bringup:eval")
	for _, a := range added {
		at := indexOf(f.order, "perf:"+a.PointID)
		require.Positive(t, at, a.PointID)
		require.Less(t, at, evalAt, "%s ran before the eval restart", a.PointID)
		require.Greater(t, a.Conc, 90)
		require.Less(t, a.Conc, 700)
		require.Equal(t, point.AdaptiveFill, a.Added.Mode)
		require.Equal(t, "twop1d", a.Added.Deployment)
		require.Contains(t, a.Added.Reason, "next to 2P1D DEP16/DEP32, whose server is up")
		require.Equal(t, tput(a.Conc), a.Outcome.State.Perf.OutputTputPerGPU, "%s has its own figures", a.PointID)
		require.Contains(t, stagesOf(pr, a.PointID), "bringup:shared", "%s used the deployment's server", a.PointID)
		require.False(t, a.PlansEval)
		require.Equal(t, PointWorkflowID("s", a.PointID), a.WorkflowID)
	}
	// The search's state: why it stopped, what was added.
	require.Len(t, pr.Adaptive, 1)
	k := pr.Adaptive[0]
	require.Len(t, k.Added, len(added))
	require.Equal(t, adaptive.Done, k.Deployments[0].State)
	require.Contains(t, k.Deployments[0].Stop, "no gap wider than x2")
	require.Empty(t, f.held)
}

func curvegapsOf(t *testing.T, c curvegaps.Curve) []curvegaps.Gap {
	res, err := curvegaps.Find([]curvegaps.Curve{c}, curvegaps.DefaultFactor)
	require.NoError(t, err)
	return res.Gaps
}

// The seed's hole between the 1P1D c256 and the 2P1D c768 deployments: with
// fill, the key's deployments come up lowest concurrency first, so the
// 2P1D deployment (its recipe sized for c1280) finds the gap above c256 and
// serves it on its own server.
func TestAdaptiveFillSeedHoleAcrossDeployments(t *testing.T) {
	low := deploymentPoints("onep1d", "1P1D DEP16/DEP32", 12, 256, 256)
	high := deploymentPoints("twop1d", "2P1D DEP16/DEP32", 16, 1280, 768, 1024, 1280)
	pts := append(slices.Clone(high), low...)
	f := newGroupFake()
	f.model = func(p point.Spec) point.PerfSummary {
		if p.DeploymentHash == "onep1d" {
			return linearE2EL(4, 0.0625)(p) // c256: 20 s
		}
		return linearE2EL(-50, 0.195)(p) // c768: 100 s
	}
	pr := runSweepInput(t, f, SweepInput{Points: pts, Adaptive: []point.Adaptive{{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}}})
	added := addedRows(pr)
	require.NotEmpty(t, added)
	for _, a := range added {
		require.Equal(t, "twop1d", a.Added.Deployment, "the 2P1D deployment serves the hole")
		require.True(t, a.Conc > 256 && a.Conc < 768, "%d", a.Conc)
	}
	require.Equal(t, 2, f.calls["allocate"], "no bring-up for the added points")
	require.Equal(t, 2, f.calls["bringup:perf"])
	// The 1P1D deployment ran first (lowest concurrency first).
	require.Less(t, indexOf(f.order, "perf:"+low[0].PointID), indexOf(f.order, "perf:"+high[0].PointID))
	require.Empty(t, curvegapsOf(t, measuredCurve(pr)))
}

// slo on one deployment: the largest concurrency of the grid meeting the
// SLO, found with fewer points than the grid has.
func TestAdaptiveSLO(t *testing.T) {
	pts := deploymentPoints("twop1d", "2P1D DEP16/DEP32", 16, 1280, 768, 1024, 1280)
	f := newGroupFake()
	f.model = linearE2EL(0, 0.1) // p99 TTFT = conc/100 s
	req := point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveSLO, SLO: &point.SLO{Metric: point.SLOTTFTp99, Max: 5},
		Grid: point.Grid{Min: 64, Step: 64}, MaxPoints: 8}
	pr := runSweepInput(t, f, SweepInput{Points: pts, Adaptive: []point.Adaptive{req}})
	k := pr.Adaptive[0]
	found := k.Deployments[0].Found
	require.NotNil(t, found)
	require.Equal(t, 448, found.Conc, "the largest multiple of 64 with p99 TTFT <= 5 s is 448 (4.48 s)")
	require.Equal(t, tput(448), found.Goodput)
	require.Contains(t, k.Deployments[0].Stop, "slo done: c448 is the largest concurrency meeting p99_ttft <= 5 s")
	require.LessOrEqual(t, len(k.Added), 4)
	require.Equal(t, 1, f.calls["bringup:perf"])
	require.Equal(t, 1, f.calls["bringup:eval"])
	for _, a := range addedRows(pr) {
		require.Equal(t, point.AdaptiveSLO, a.Added.Mode)
		require.Equal(t, req.SLO, a.Added.SLO)
	}
}

// A search stops, and says why, once its deployment's server is gone; the
// added point that found no server brought none up.
func TestAdaptiveStopsWhenTheServerIsGone(t *testing.T) {
	pts := deploymentPoints("twop1d", "2P1D DEP16/DEP32", 16, 1280, 90, 700)
	f := newGroupFake()
	f.model = linearE2EL(8, 0.132)
	// The first added point (what coverage suggests first) finds the
	// server dead when it probes it.
	var plan curvegaps.Curve
	for _, p := range pts {
		perf := f.model(p)
		plan.Points = append(plan.Points, curvegaps.Point{Conc: p.Conc, E2ELSeconds: perf.E2ELMedianMs / 1000, Interactivity: perf.Interactivity})
	}
	gaps := curvegapsOf(t, plan)
	first, err := pts[0].AtConc(gaps[0].SuggestConc[0])
	require.NoError(t, err)
	f.dead[first.PointID] = true
	pr := runSweepInput(t, f, SweepInput{Points: pts, Adaptive: []point.Adaptive{{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}}})
	added := addedRows(pr)
	require.Len(t, added, 1, "%+v", added)
	require.Equal(t, first.PointID, added[0].PointID)
	require.Equal(t, point.StatusFailed, added[0].Status)
	require.Contains(t, added[0].Outcome.Error, "never brings one up")
	require.Equal(t, 1, f.calls["bringup:perf"], "no bring-up for the added point")
	stop := pr.Adaptive[0].Deployments[0].Stop
	require.True(t, strings.HasPrefix(stop, "server torn down: point "+first.PointID+" failed"), stop)
	// The eval still ran: the deployment allocated again for its eval phase.
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Empty(t, f.held)
}

// The key's budget is shared by its deployments.
func TestAdaptiveBudgetPerKey(t *testing.T) {
	a := deploymentPoints("a", "A", 4, 0, 10, 1000)
	b := deploymentPoints("b", "B", 4, 0, 20, 2000)
	f := newGroupFake()
	f.model = linearE2EL(1, 0.5)
	pr := runSweepInput(t, f, SweepInput{Points: append(a, b...), NodeBudget: 4,
		Adaptive: []point.Adaptive{{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}}})
	require.Len(t, addedRows(pr), 3)
	var stops []string
	for _, d := range pr.Adaptive[0].Deployments {
		stops = append(stops, d.Stop)
	}
	require.Contains(t, strings.Join(stops, "\n"), "budget spent: 3 of 3 added points")
	require.Equal(t, 2, f.calls["bringup:perf"])
}
