package workerapp

import (
	"strconv"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/config"
)

// slurmBackend serves a slurm cluster profile. With the sbatch launcher the
// serving step is the simulator (`starter sim serve`) playing the row's
// deployment on the head node, which is what the emulated partition
// (configs/clusters/slurm-emu.yaml) runs; with srtctl the srt-slurm job
// starts the real engines itself. The starter binary must be at the same path
// on the compute nodes (staging runs `starter stage` there).
func (c *Config) slurmBackend(cl *config.Cluster, gsm8kTest string) (cluster.Backend, error) {
	bin, err := c.starterBinary()
	if err != nil {
		return nil, err
	}
	serve := []string{bin, "sim", "serve", "--listen", "{listen}", "--deployment", "{deployment}",
		"--gpus-per-node", "{gpus_per_node}", "--model", "{model}",
		"--time-scale", strconv.FormatFloat(c.SimTimeScale, 'f', -1, 64),
		"--accuracy", strconv.FormatFloat(c.SimAccuracy, 'f', -1, 64)}
	if gsm8kTest != "" {
		serve = append(serve, "--gsm8k", gsm8kTest)
	}
	return slurm.New(slurm.Config{
		Partition: cl.Partition, Account: cl.Account, SharedRoot: cl.SharedRoot, NodeLocalRoot: cl.NodeLocalRoot,
		RecipesRoot: cl.RecipesRoot, Launcher: cl.Launcher, DefaultTimeLimit: cl.DefaultTimeLimit,
		QueueWait: c.SlurmQueueWait, StarterBin: bin,
		// The simulator picks a free port and prints it; the backend reads
		// the address from the step's log in the job directory.
		Listen:    "127.0.0.1:0",
		Roles:     map[string][]string{"frontend": serve},
		JobPrefix: "sweepflow",
	})
}
