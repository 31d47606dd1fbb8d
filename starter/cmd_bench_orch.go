package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/bench"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/errtext"
)

func init() {
	register("bench orchestration", newBenchOrchCmd)
}

// benchOrchestration runs `starter bench orchestration args` in-process.
func benchOrchestration(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, newBenchOrchCmd(), args, stdout, stderr)
}

func newBenchOrchCmd() *cobra.Command {
	var o bench.Orchestration
	c := &cobra.Command{Use: "orchestration", Short: "measure orchestration alone: a sweep of N points on a no-op cluster (points/min, stage transitions, history sizes)",
		Long: bench.OrchestrationUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return usageError("%v", err)
			}
			in, _, err := control.Build(control.Request{SweepFile: o.SweepFile})
			if err == nil && len(in.Points) == 0 {
				err = fmt.Errorf("%s: the plan has no points", o.SweepFile)
			}
			if err != nil {
				return usageError("%s (--sweep names the plan whose points are repeated)", errtext.FirstLine(err))
			}
			o.Template = in.Points
			if o.Address == "" {
				wd, _ := os.Getwd()
				if o.DevServer, o.OwnDevServer, err = devServerBinary(wd, o.Stock); err != nil {
					return err
				}
			}
			return o.Run(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}}
	o.RegisterFlags(c.Flags())
	return c
}
