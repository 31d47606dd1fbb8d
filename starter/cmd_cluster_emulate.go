package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/sim"
)

func init() { register("cluster emulate", newClusterEmulateCmd) }

// newClusterEmulateCmd writes the profile under which the emulated
// partition stands in for a rack's profile, and the simulated checkpoints
// its model aliases point at (scripts/fleet.sh runs a whole fleet on it).
func newClusterEmulateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "emulate PROFILE",
		Short: "write a profile that runs PROFILE's keys on the emulated partition (its aliases on simulated checkpoints)",
		Long: `Writes a cluster profile under which the emulated Slurm partition
(--emulation, default configs/clusters/slurm-emu.yaml) stands in for the rack
of PROFILE: the emulation's nodes, roots and simulator entry points, with
PROFILE's GPU type, runner labels, model aliases, container names and
bring-up time, so every key PROFILE launches plans and renders the same on
the emulation. --inferencex and --srt-slurm name the checkouts its recipes
root is composed from (the profile's inferencex and srt-slurm keys). Each model alias points at the emulation's filesystems;
--checkpoints writes a small simulated checkpoint (random bytes, not
weights) at each alias's shared copy. Perf runs sweepflow's load generator
(the emulation has no simulator role for sa-bench). Every figure measured
on it is simulated.`,
		Example: "  starter cluster emulate configs/clusters/gb200-nvl72.yaml --inferencex ~/InferenceX --srt-slurm ~/srt-slurm --checkpoints --out /tmp/fleet-gb200.yaml",
		Args:    exactArgs(1),
	}
	var emuPath, out, ix, srt string
	var ckpt bool
	var shards, shardMiB int
	fs := c.Flags()
	fs.StringVar(&emuPath, "emulation", "configs/clusters/slurm-emu.yaml", "the emulated partition's profile")
	fs.StringVarP(&out, "out", "o", "", "write the profile here (default: stdout)")
	fs.StringVar(&ix, "inferencex", "", "InferenceX checkout: the profile's recipes root is its recipes laid over --srt-slurm, as its launchers lay them")
	fs.StringVar(&srt, "srt-slurm", "", "srt-slurm checkout (with --inferencex: what InferenceX's recipes are laid over)")
	fs.BoolVar(&ckpt, "checkpoints", false, "write a simulated checkpoint at every model alias's shared copy (kept where one is already there)")
	fs.IntVar(&shards, "shards", 1, "with --checkpoints: shard files per checkpoint")
	fs.IntVar(&shardMiB, "shard-mib", 1, "with --checkpoints: MiB per shard")
	c.RunE = func(c *cobra.Command, args []string) error {
		if shards <= 0 || shardMiB <= 0 {
			return usageError("--shards and --shard-mib must be >= 1")
		}
		target, err := config.LoadCluster(args[0])
		if err != nil {
			return configError(err)
		}
		emu, err := config.LoadCluster(emuPath)
		if err != nil {
			return configError(err)
		}
		for _, p := range []*string{&ix, &srt} {
			if *p != "" {
				if *p, err = filepath.Abs(*p); err != nil {
					return err
				}
			}
		}
		data, err := config.EmulatedFleet(target, emu, ix, srt)
		if err != nil {
			return configError(err)
		}
		if ckpt {
			fleet, err := config.ParseCluster("the emulated fleet profile", emu.Path, data)
			if err != nil {
				return configError(err)
			}
			dirs := config.FleetCheckpoints(fleet)
			for _, dir := range dirs {
				if _, err := sim.WriteCheckpoint(dir, shards, shardMiB); err != nil {
					return err
				}
			}
			fmt.Fprintf(c.ErrOrStderr(), "simulated checkpoints: %d (%d x %d MiB each) under %s\n", len(dirs), shards, shardMiB, emu.SharedRoot)
		}
		if out == "" {
			_, err = c.OutOrStdout().Write(data)
			return err
		}
		return os.WriteFile(out, data, 0o644)
	}
	return c
}
