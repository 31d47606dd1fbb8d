package control

import (
	"fmt"
	"slices"

	"github.com/sweepflow/sweepflow/chaos"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/workflows"
)

// Chaos is the chaos run part of `sweep start --chaos` (package chaos).
type Chaos struct {
	Seed int64
	// Faults is how many to draw (0: one of each kind the run can inject).
	Faults int
	// Kinds limits the kinds (nil: every kind).
	Kinds []chaos.Kind
	// Worker and Server: the run has a worker process to kill and a
	// server to restart.
	Worker, Server bool
}

// ApplyChaos draws a chaos run's faults over the sweep's points and puts
// those its stages carry out into the points' specs. Only a simulated
// cluster (local-sim) or an emulated partition (slurm-emu) takes one: a
// real cluster is refused, naming its profile. derivedID says the sweep's
// ID came from its plan: it then names the seed too, so a chaos run is
// another sweep than a plain one or another seed's.
func ApplyChaos(in *workflows.SweepInput, cl *config.Cluster, c Chaos, derivedID bool) ([]chaos.Fault, error) {
	if !cl.Simulated() {
		return nil, fmt.Errorf("--chaos: cluster %s runs real engines; chaos runs only on simulated and emulated clusters (local-sim, slurm-emu)", cl.Name)
	}
	kinds := chaos.Kinds(cl.Emulation != nil, c.Worker, c.Server)
	if c.Kinds != nil {
		kinds = slices.DeleteFunc(kinds, func(k chaos.Kind) bool { return !slices.Contains(c.Kinds, k) })
	}
	faults, err := chaos.Draw(c.Seed, in.Points, kinds, c.Faults)
	if err != nil {
		return nil, err
	}
	chaos.Apply(faults, in.Points)
	if derivedID {
		in.SweepID = defaultSweepID(in.Name, in, fmt.Sprintf("chaos seed %d", c.Seed))
	}
	return faults, nil
}
