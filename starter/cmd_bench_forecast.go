package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/bench"
)

func init() { register("bench forecast", newBenchForecastCmd) }

func newBenchForecastCmd() *cobra.Command {
	var f bench.ForecastMaster
	var jsonOut bool
	c := &cobra.Command{Use: "forecast", Short: "time the forecast of a whole master config (all GB200 and GB300 keys) on two cluster profiles",
		Long: forecastMasterUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.Validate(); err != nil {
				return usageError("%v", err)
			}
			out := c.OutOrStdout()
			if jsonOut {
				out = c.ErrOrStderr()
			}
			runs, err := f.Run(c.Context(), out)
			if err != nil {
				return configError(err)
			}
			if jsonOut {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			return nil
		}}
	bindForecastMasterFlags(c.Flags(), &f)
	c.Flags().BoolVar(&jsonOut, "json", false, "JSON for machines (the table goes to stderr)")
	return c
}

// forecastMasterUsage is the command's help.
const forecastMasterUsage = `usage: starter bench forecast [--inferencex DIR] [--cluster PROFILE]... [--config-keys GLOB]... [--sized] [--runs N]

Times the forecast of a whole master config: every key of DIR/nvidia-master.yaml
matching the globs (default *gb200* and *gb300*) with DIR/runners.yaml, recipes
under DIR, on the given profiles (default configs/clusters/gb200-nvl72.yaml and
gb300-nvl72.yaml), as starter forecast makes it. DIR defaults to
$SWEEPFLOW_INFERENCEX. Prints, per run, the wall time and what was forecast,
then per cluster the points, deployments, node-hours, GPU-hours, makespan
and lower bound, and the keys left out by reason.

--sized forecasts the same keys again with a recipe written from each row
(workers, GPUs per worker and the nodes they fill; no recipe of InferenceX's
is read), so that the keys whose recipes are missing also run through the
sweep workflow: the time for the whole master config at full size.`

// bindForecastMasterFlags binds the command's flags.
func bindForecastMasterFlags(fs *flag.FlagSet, f *bench.ForecastMaster) {
	fs.StringVar(&f.InferenceX, "inferencex", os.Getenv("SWEEPFLOW_INFERENCEX"), "InferenceX data: nvidia-master.yaml, runners.yaml, recipes/ (default $SWEEPFLOW_INFERENCEX)")
	fs.StringSliceVar(&f.Clusters, "cluster", []string{"configs/clusters/gb200-nvl72.yaml", "configs/clusters/gb300-nvl72.yaml"}, "cluster profiles, in the order keys are given to them")
	fs.StringSliceVar(&f.Keys, "config-keys", []string{"*gb200*", "*gb300*"}, "config keys or globs")
	fs.BoolVar(&f.Sized, "sized", false, "also forecast with a recipe written from each row, so every key runs through the workflows")
	fs.IntVar(&f.Runs, "runs", 1, "timed runs of each forecast")
}
