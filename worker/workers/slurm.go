package workers

import (
	"strconv"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// slurmBackend serves a slurm cluster profile: the backend launches the
// recipe's process set (srtlaunch.Render) in each point's holder job, with
// pyxis container flags when the profile's runtime is pyxis. On an emulated
// partition (the profile's emulation section) every rendered command is
// handed to a simulator role, `starter sim role ROLE -- ARGV`, with the
// simulator's settings in SWEEPFLOW_SIM_*. The starter binary must be at the
// same path on the compute nodes (staging runs `starter stage` there).
func (c *Config) slurmBackend(cl *config.Cluster, gsm8kTest string) (cluster.Backend, error) {
	bin, err := c.starterBinary()
	if err != nil {
		return nil, err
	}
	l := slurm.Launch{
		Runtime: cl.Runtime, Containers: cl.Containers, RowImageContainers: cl.RowImageContainers, SrtRoot: cl.SrtRoot, InfmaxWorkspace: cl.InfmaxWorkspace,
		Models: cl.Models,
	}
	if cl.Emulation != nil {
		l.Entrypoints = cl.Emulation.Entrypoints
		// A setting left at zero (a Config built in code rather than from
		// flags) is not exported: the role keeps its own default.
		l.SimEnv = map[string]string{"SWEEPFLOW_SIM_GPUS_PER_NODE": strconv.Itoa(cl.GPUsPerNode)}
		for k, v := range map[string]float64{
			"SWEEPFLOW_SIM_TIME_SCALE": c.SimTimeScale, "SWEEPFLOW_SIM_ACCURACY": c.SimAccuracy, "SWEEPFLOW_SIM_SLOWDOWN": c.SimSlowdown,
		} {
			if v > 0 {
				l.SimEnv[k] = strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		if gsm8kTest != "" {
			l.SimEnv["SWEEPFLOW_SIM_GSM8K"] = gsm8kTest
		}
		if c.SimCrash != "" {
			l.SimEnv[simenv.EnvCrash] = c.SimCrash
		}
	}
	return slurm.New(slurm.Config{
		Partition: cl.Partition, Account: cl.Account, SharedRoot: cl.SharedRoot, NodeLocalRoot: cl.NodeLocalRoot,
		RecipesRoot: cl.RecipesRoot, Launcher: cl.Launcher, DefaultTimeLimit: cl.DefaultTimeLimit,
		QueueWait: c.SlurmQueueWait, StarterBin: bin, Launch: l, JobPrefix: "sweepflow",
		Signatures: failure.Builtin().With(cl.FailureSignatures...),
	})
}
