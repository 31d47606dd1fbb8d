package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/nodehealth"
	"github.com/sweepflow/sweepflow/results"
)

func init() {
	register("nodes", newNodesCmd)
	register("nodes clear", newNodesClearCmd)
}

// nodesFlags name the ledger and the cluster whose nodes are judged.
type nodesFlags struct {
	lf      ledgerFlags
	cluster string
}

func (f *nodesFlags) bind(c *cobra.Command, clusterHelp string) {
	f.lf.bind(c.Flags())
	c.Flags().StringVar(&f.cluster, "cluster", "", clusterHelp)
}

// profile is the cluster's name and bad-node policy ("" and the defaults
// without --cluster).
func (f *nodesFlags) profile() (string, nodehealth.Policy, error) {
	if f.cluster == "" {
		return "", nodehealth.DefaultPolicy, nil
	}
	cl, err := config.LoadCluster(f.cluster)
	if err != nil {
		return "", nodehealth.Policy{}, err
	}
	return cl.Name, cl.BadNodes, nil
}

// nodeHealth is the cluster's nodes as judged now, with the open ledger
// they were read from (the caller closes it).
type nodeHealth struct {
	store   *results.Store
	cluster string
	policy  nodehealth.Policy
	nodes   []nodehealth.Node
}

// health opens the ledger and judges the cluster's nodes now.
func (f *nodesFlags) health(ctx context.Context) (nodeHealth, error) {
	name, policy, err := f.profile()
	if err != nil {
		return nodeHealth{}, err
	}
	store, _, _, err := f.lf.open(ctx)
	if err != nil {
		return nodeHealth{}, err
	}
	nodes, err := store.NodeHealth(ctx, name, policy, time.Now())
	if err != nil {
		store.Close()
		return nodeHealth{}, err
	}
	return nodeHealth{store: store, cluster: name, policy: policy, nodes: nodes}, nil
}

func newNodesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "nodes",
		Short: "bad nodes: the nodes kept out of new allocations and the suspects, with their evidence",
		Long: `nodes lists every node named in the evidence of a failed attempt that points at
its hardware (node failure, GPU Xid, NCCL or NVLink errors) within the policy's
window: excluded nodes (sbatch --exclude for every new holder job) and
suspects, each with the failures that count. The cluster profile's bad-nodes
section sets the policy (default: 2 attempts within 24h).`,
		Args: noArgs,
	}
	var f nodesFlags
	f.bind(c, "cluster profile whose nodes and bad-nodes policy to use (default: every cluster in the ledger, default policy)")
	asJSON := c.Flags().Bool("json", false, "print the policy and the nodes as JSON")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		h, err := f.health(context.Background())
		if err != nil {
			return err
		}
		h.store.Close()
		if *asJSON {
			return nodehealth.WriteJSON(cmd.OutOrStdout(), h.policy, h.nodes)
		}
		return nodehealth.WriteText(cmd.OutOrStdout(), h.policy, h.nodes)
	}
	return c
}

func newNodesClearCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "clear NAME...",
		Short: "let nodes back into new allocations: their failures so far no longer count",
		Args:  cobra.MinimumNArgs(1),
	}
	var f nodesFlags
	f.bind(c, "cluster profile the nodes belong to (required)")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if f.cluster == "" {
			return usageError("--cluster PROFILE is required: node names are unique within a cluster only")
		}
		ctx := context.Background()
		h, err := f.health(ctx)
		if err != nil {
			return err
		}
		defer h.store.Close()
		known := map[string]nodehealth.Verdict{}
		for _, n := range h.nodes {
			known[n.Node] = n.Verdict
		}
		by := os.Getenv("USER")
		if u, err := user.Current(); err == nil {
			by = u.Username
		}
		now := time.Now()
		for _, node := range args {
			if err := h.store.PutNodeClear(ctx, nodehealth.Clear{Cluster: h.cluster, Node: node, At: now, By: by}); err != nil {
				return err
			}
			was := known[node]
			if was == "" {
				was = "not listed"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cleared %s on %s (was %s): its failures so far no longer count\n", node, h.cluster, was)
		}
		return nil
	}
	return c
}
