package main

import (
	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/bench"
)

func init() {
	register("bench capacity", newBenchCapacityCmd)
}

func newBenchCapacityCmd() *cobra.Command {
	var o bench.Capacity
	c := &cobra.Command{Use: "capacity", Short: "measure the load generator itself: chunks/s and timestamp accuracy against the simulator", Args: noArgs,
		Long: bench.CapacityUsage,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return usageError("%v", err)
			}
			return o.Run(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}}
	o.RegisterFlags(c.Flags())
	return c
}
