package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/bench"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"
)

func init() { register("bench nodeminutes", newBenchNodeMinutesCmd) }

func newBenchNodeMinutesCmd() *cobra.Command {
	c := &cobra.Command{Use: "nodeminutes", Short: "node-minutes of a sweep with one bring-up per deployment vs one per point",
		Long: `usage: starter bench nodeminutes --sweep F [--cluster F] [--warmup D] [--eval D] [--json]

Estimates the node-minutes a sweep holds: per allocation, nodes x (bring-up
+ warmup + perf duration from the matrix row + eval restart + eval). With
shared bring-up (what sweeps do) the points of one deployment are one
allocation: one bring-up, every point's warmup and perf one after another,
one eval-mode restart for the deployment's evals. The comparison gives
every point its own allocation and bring-up. The bring-up time comes from
the cluster profile's bring-up-time; warmup and eval times are assumptions
given by flags. Nothing is submitted or measured.`,
		Args: noArgs}
	var f planFlags
	var times plan.NodeMinuteTimes
	fs := c.Flags()
	fs.StringVar(&f.sweep, "sweep", "", "sweep file (configs/sweeps/*.yaml)")
	fs.StringVar(&f.cluster, "cluster", "", "cluster profile; overrides the sweep's")
	f.recipes.bind(fs)
	fs.DurationVar(&times.Warmup, "warmup", plan.DefaultWarmup, "warmup time per point (assumed)")
	fs.DurationVar(&times.Eval, "eval", plan.DefaultEval, "one GSM8K eval run (assumed)")
	fs.BoolVar(&f.jsonOut, "json", false, "JSON for machines")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if f.sweep == "" {
			return &exitError{code: 2, msg: "give --sweep FILE"}
		}
		if times.Warmup < 0 || times.Eval < 0 {
			return &exitError{code: 2, msg: "--warmup and --eval must not be negative"}
		}
		s, err := sweepFromFlags(&f)
		if err != nil {
			return err
		}
		if s.ClusterPath == "" {
			return &exitError{code: 2, msg: "no cluster profile: give --cluster FILE or set cluster in the sweep file"}
		}
		cluster, err := config.LoadCluster(s.ClusterPath)
		if err != nil {
			return configError(err)
		}
		root, err := f.recipes.resolve()
		if err != nil {
			return err
		}
		p, err := plan.Build(plan.Options{Sweep: s, Cluster: cluster, RecipesRoot: root})
		if err != nil {
			return configError(err)
		}
		times.BringUp = cluster.BringUpTime
		rep, err := plan.NodeMinutes(p, times)
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		out := c.OutOrStdout()
		if f.jsonOut {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Sweep   string `json:"sweep"`
				Cluster string `json:"cluster"`
				plan.NodeMinuteReport
			}{p.SweepName, cluster.Name, rep})
		}
		return bench.WriteNodeMinutes(out, p, cluster, rep)
	}
	return c
}
