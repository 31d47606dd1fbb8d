package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/sim"
)

func init() {
	register("sim checkpoint", newSimCheckpointCmd)
}

// newSimCheckpointCmd writes deterministic shard files so checkpoint staging
// has real bytes to copy, hash and verify on a machine without the model.
func newSimCheckpointCmd() *cobra.Command {
	c := &cobra.Command{Use: "checkpoint", Short: "write a small simulated checkpoint (safetensors-like shards) for the simulated cluster", Args: noArgs}
	fs := c.Flags()
	dir := fs.String("dir", "", "checkpoint directory to create (e.g. <shared-root>/deepseek-ai/DeepSeek-V4-Pro-0813)")
	shards := fs.Int("shards", 8, "number of shard files")
	shardMiB := fs.Int("shard-mib", 8, "size of each shard in MiB")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *dir == "" || *shards <= 0 || *shardMiB <= 0 {
			return usageError("--dir is required, --shards and --shard-mib must be >= 1 (usage: %s)", c.UseLine())
		}
		written, err := sim.WriteCheckpoint(*dir, *shards, *shardMiB)
		if err != nil {
			return err
		}
		fmt.Printf("simulated checkpoint at %s: %d shards x %d MiB (%d written)\n", *dir, *shards, *shardMiB, written)
		return nil
	}
	return c
}
