package runner_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// tieInputs are the stage times of the tie fixtures: a bring-up of 20 m
// and a warmup of 5 m, nothing else but perf.
var tieInputs = forecast.Inputs{Profile: forecast.Profile{Name: "fixture", Nodes: 18, GPUsPerNode: 4, BringUp: 20 * time.Minute},
	Assumptions: forecast.Assumptions{Warmup: 5 * time.Minute}}

func tiePoint(dep string, conc, nodes int, perf time.Duration) point.Spec {
	return point.Spec{PointID: fmt.Sprintf("%s-c%d", dep, conc), ConfigKey: "ties", Topology: dep, Conc: conc,
		Nodes: nodes, GPUs: 4 * nodes, DeploymentHash: dep, DurationSec: int(perf.Seconds())}
}

// tieFixture is a sweep in which many points end at one virtual instant
// and what starts next depends on the order the sweep hears of them: 48
// deployments of 1 to 9 nodes on 18, every other one a point of 1 h perf
// (1:25 with bring-up and warmup), the others two points of 2 h (4:30), so
// completions pile up on five-minute marks; a blocked large deployment may
// be bypassed only twice, so which one finishes first decides which one
// starts. Before the tie-breaker its makespan came out 40:00, 42:50 or
// 43:05 from run to run. nodeMinutes is its node-time, by hand.
func tieFixture() (in workflows.SweepInput, nodeMinutes int) {
	var pts []point.Spec
	for i := range 48 {
		dep, nodes := fmt.Sprintf("d%02d", i), 1+(i*5)%9
		if i%2 == 0 {
			pts = append(pts, tiePoint(dep, 1, nodes, time.Hour))
			nodeMinutes += nodes * (20 + 5 + 60)
			continue
		}
		pts = append(pts, tiePoint(dep, 1, nodes, 2*time.Hour), tiePoint(dep, 2, nodes, 2*time.Hour))
		nodeMinutes += nodes * (20 + 2*(5+120))
	}
	return workflows.SweepInput{SweepID: "ties", Name: "ties", Cluster: "fixture", NodeBudget: 18, Points: pts}, nodeMinutes
}

// TestForecastIsDeterministic forecasts the tie fixture ten times: the
// makespan, the critical path, the node-hours and the order the points
// finished are the same every time. Points that end at one virtual instant
// reach the sweep in plan order, not in the order the test environment's
// goroutines happen to deliver them.
func TestForecastIsDeterministic(t *testing.T) {
	in, nodeMinutes := tieFixture()
	first, err := runner.Run(in, tieInputs)
	require.NoError(t, err)
	require.Len(t, first.FinishOrder, len(in.Points))
	// The tie-breaker costs no time: the figures are the stage times' own.
	assert.InDelta(t, float64(nodeMinutes)/60, first.NodeHours, 1e-9)
	assert.InDelta(t, float64(nodeMinutes)/60/18, first.NodeBoundHours, 1e-9)
	assert.InDelta(t, 4.5, first.LongestDeploymentHours, 1e-9)
	for _, s := range first.CriticalPath {
		for _, h := range []float64{s.StartHours, s.EndHours} {
			assert.InDelta(t, 0, h*12-float64(int(h*12+0.5)), 1e-9, "%s: on a five-minute mark", s.Deployment)
		}
	}
	for run := 2; run <= 10; run++ {
		c, err := runner.Run(in, tieInputs)
		require.NoError(t, err)
		require.Equal(t, first.MakespanHours, c.MakespanHours, "run %d: makespan", run)
		require.Equal(t, first.CriticalPath, c.CriticalPath, "run %d: critical path", run)
		require.Equal(t, first.NodeHours, c.NodeHours, "run %d: node-hours", run)
		require.Equal(t, first.FinishOrder, c.FinishOrder, "run %d: finish order", run)
	}
	t.Logf("makespan %.4f h, lower bound %.4f h, %d deployments on the critical path", first.MakespanHours, first.LowerBoundHours, len(first.CriticalPath))
}

// TestForecastTiesEndInPlanOrder: two deployments that end at one instant
// (1:25) end in plan order, whichever way round the plan lists them, and
// the makespan is that instant to the nanosecond.
func TestForecastTiesEndInPlanOrder(t *testing.T) {
	a, b := tiePoint("a", 1, 4, time.Hour), tiePoint("b", 1, 6, time.Hour)
	for _, pts := range [][]point.Spec{{a, b}, {b, a}} {
		in := workflows.SweepInput{SweepID: "ties", Name: "ties", Cluster: "fixture", NodeBudget: 18, Points: pts}
		c, err := runner.Run(in, tieInputs)
		require.NoError(t, err)
		assert.Equal(t, []string{pts[0].PointID, pts[1].PointID}, c.FinishOrder)
		assert.Equal(t, 85*time.Minute, c.Timeline.End.Sub(c.Timeline.Start))
		assert.Equal(t, 10*85.0/60, c.NodeHours)
		for _, e := range c.Timeline.Events {
			assert.Zero(t, e.End.Sub(c.Timeline.Start)%time.Second, "%s %s ends on a whole second", e.Point.PointID, e.Activity)
		}
		ends := slices.IndexFunc(c.CriticalPath, func(s forecast.Step) bool { return s.EndHours != 85.0/60 })
		assert.Equal(t, -1, ends, "every step of the critical path ends at 1:25: %+v", c.CriticalPath)
	}
}

// BenchmarkForecast forecasts the seed plan on the GB200 profile, alone and
// repeated as independent deployments (1,200 points): the cost of running
// the sweep workflow in virtual time. Figures: docs/performance.md.
func BenchmarkForecast(b *testing.B) {
	s, err := config.LoadSweep("../../configs/sweeps/dsv4-gb200-agentx.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cl, err := config.LoadCluster("../../configs/clusters/gb200-nvl72.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Build(plan.Options{Sweep: s, Cluster: cl})
	if err != nil {
		b.Fatal(err)
	}
	seed := plan.PointSpecs(p, cl, s.Evals)
	inputs := forecast.Inputs{Profile: forecast.Profile{Name: cl.Name, Nodes: cl.Nodes, GPUsPerNode: cl.GPUsPerNode, BringUp: cl.BringUpTime},
		Assumptions: forecast.DefaultAssumptions()}
	for _, copies := range []int{1, 150} {
		var pts []point.Spec
		for i := range copies {
			for _, p := range seed {
				p.PointID = fmt.Sprintf("%s-%d", p.PointID, i)
				p.DeploymentHash = fmt.Sprintf("%s-%d", p.DeploymentHash, i)
				pts = append(pts, p)
			}
		}
		in := workflows.SweepInput{SweepID: "bench", Name: s.Name, Cluster: cl.Name, NodeBudget: cl.Nodes, Points: pts}
		b.Run(fmt.Sprintf("points=%d", len(pts)), func(b *testing.B) {
			var c *forecast.Cluster
			for b.Loop() {
				if c, err = runner.Run(in, inputs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(c.MakespanHours, "makespan-h")
		})
	}
}
