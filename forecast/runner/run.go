package runner

import (
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/workflows"
)

// Run forecasts a sweep input on one cluster: it resolves every
// deployment's stage times, runs the real sweep workflow in virtual time
// (Simulate) and sums what it held.
func Run(in workflows.SweepInput, inputs forecast.Inputs) (*forecast.Cluster, error) {
	c := forecast.NewCluster(inputs.Profile, in.NodeBudget)
	if in.NodeBudget == 0 {
		in.NodeBudget = c.Nodes
	}
	if len(in.Points) == 0 {
		return c, nil
	}
	clk, err := forecast.NewStageClock(in.Points, inputs)
	if err != nil {
		return nil, err
	}
	tl, err := Simulate(in, clk)
	if err != nil {
		return nil, err
	}
	canaries := map[string]bool{}
	for _, g := range in.Canaries {
		canaries[g.PointID] = true
	}
	c.Summarize(in.Points, canaries, inputs, clk, tl)
	return c, nil
}
