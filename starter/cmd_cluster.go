package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/config"
)

func init() { register("cluster import", newClusterImportCmd) }

// newClusterImportCmd writes a cluster profile from srt-slurm's cluster
// file: what srtctl already knows about the cluster, plus what a sweepflow
// profile needs that the file does not say.
func newClusterImportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "import SRTSLURM_YAML",
		Short: "write a cluster profile from srt-slurm's srtslurm.yaml (model_paths, containers, account, partition, time limit)",
		Long: `Writes a sweepflow cluster profile from an srtslurm.yaml, the file srtctl
reads on a cluster: default_account, default_partition, default_time_limit,
gpus_per_node, srtctl_root (the srt-slurm checkout), model_paths (the
profile's models) and containers. What the file does not say comes from the
flags: the node count, the shared and node-local roots, and optionally the
InferenceX checkout whose recipes are laid over srtctl_root and the runner
labels the cluster serves. Fields the file sets that a profile has no
counterpart for are named in the profile's header and on stderr. The file is
read as strictly as srtctl reads it: srtctl drops the whole file on a key it
does not know, so that is an error here. To keep the aliases and containers
in the file instead of copying them, name it in a profile as
srtslurm-yaml: FILE.`,
		Example: "  starter cluster import srtslurm.yaml --nodes 18 --shared-root /mnt/lustre01/sweepflow \\\n" +
			"      --node-local-root /mnt/numa1/sweepflow --inferencex /mnt/lustre01/InferenceX --out configs/clusters/mine.yaml",
		Args: exactArgs(1),
	}
	var from config.ProfileFrom
	var out string
	fs := c.Flags()
	fs.StringVar(&from.Name, "name", "", "profile name (default: the file's cluster)")
	fs.IntVar(&from.Nodes, "nodes", 0, "nodes in the partition (required)")
	fs.IntVar(&from.GPUsPerNode, "gpus-per-node", 0, "GPUs per node (default: the file's gpus_per_node)")
	fs.StringVar(&from.SharedRoot, "shared-root", "", "shared filesystem root every node mounts (required)")
	fs.StringVar(&from.NodeLocalRoot, "node-local-root", "", "node-local root checkpoints are staged to (required)")
	fs.StringVar(&from.InferenceX, "inferencex", "", "InferenceX checkout: its recipes are laid over srtctl_root as its launchers lay them")
	fs.StringSliceVar(&from.Runners, "runners", nil, "InferenceX runner labels the cluster serves (default: any)")
	fs.StringVarP(&out, "out", "o", "", "write the profile here (default: stdout)")
	c.RunE = func(c *cobra.Command, args []string) error {
		if from.Nodes <= 0 || from.SharedRoot == "" || from.NodeLocalRoot == "" {
			return usageError("--nodes, --shared-root and --node-local-root are required: srtslurm.yaml does not say them")
		}
		for _, p := range []*string{&from.SharedRoot, &from.NodeLocalRoot, &from.InferenceX} {
			if *p != "" {
				abs, err := filepath.Abs(*p)
				if err != nil {
					return err
				}
				*p = abs
			}
		}
		s, err := config.LoadSrtslurm(args[0])
		if err != nil {
			return configError(err)
		}
		if from.Name == "" && s.Cluster == "" {
			return usageError("give --name: %s names no cluster", args[0])
		}
		if from.GPUsPerNode == 0 && s.GPUsPerNode == 0 {
			return usageError("give --gpus-per-node: %s has no gpus_per_node", args[0])
		}
		data, err := s.Profile(from)
		if err != nil {
			return configError(err)
		}
		if len(s.Unused) > 0 {
			fmt.Fprintf(c.ErrOrStderr(), "not carried (no counterpart in a profile): %s\n", strings.Join(s.Unused, ", "))
		}
		if out == "" {
			_, err = c.OutOrStdout().Write(data)
			return err
		}
		return os.WriteFile(out, data, 0o644)
	}
	return c
}
