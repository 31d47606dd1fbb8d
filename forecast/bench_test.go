package forecast_test

import (
	"fmt"
	"testing"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// BenchmarkForecast forecasts the seed plan on the GB200 profile, alone and
// repeated as independent deployments (1,200 points): the cost of running
// the sweep workflow in virtual time. Figures: docs/performance.md.
func BenchmarkForecast(b *testing.B) {
	s, err := config.LoadSweep("../configs/sweeps/dsv4-gb200-agentx.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cl, err := config.LoadCluster("../configs/clusters/gb200-nvl72.yaml")
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
				if c, err = forecast.Run(in, inputs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(c.MakespanHours, "makespan-h")
		})
	}
}
