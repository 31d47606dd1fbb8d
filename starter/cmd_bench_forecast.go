package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/bench"
)

func init() { register("bench forecast", newBenchForecastCmd) }

func newBenchForecastCmd() *cobra.Command {
	var f bench.ForecastMaster
	var jsonOut bool
	c := &cobra.Command{Use: "forecast", Short: "time the forecast of a whole master config (all GB200 and GB300 keys) on two cluster profiles",
		Long: bench.ForecastMasterUsage, Args: noArgs,
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
	f.RegisterFlags(c.Flags())
	c.Flags().BoolVar(&jsonOut, "json", false, "JSON for machines (the table goes to stderr)")
	return c
}
