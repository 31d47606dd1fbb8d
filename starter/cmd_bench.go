package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/bench"
)

func init() {
	register("bench", newBenchCmd)
	register("bench trace-gen", newBenchTraceGenCmd)
}

func newBenchCmd() *cobra.Command {
	var e bench.Endpoint
	c := &cobra.Command{Use: "bench", Short: "benchmark an OpenAI-compatible endpoint (InferenceX metrics, vllm bench serve flags)", Long: bench.EndpointUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := e.Options()
			if err != nil {
				return usageError("%v", err)
			}
			return e.Run(c.Context(), opts, c.OutOrStdout(), c.ErrOrStderr())
		}}
	e.RegisterFlags(c.Flags())
	return c
}

// benchEndpoint runs `starter bench args` in-process.
func benchEndpoint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, newBenchCmd(), args, stdout, stderr)
}

func newBenchTraceGenCmd() *cobra.Command {
	var g bench.TraceGen
	c := &cobra.Command{Use: "trace-gen", Short: "write a deterministic synthetic AgentX trace (corpus format, JSONL) for bench --trace",
		Long: bench.TraceGenUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := g.Validate(); err != nil {
				return usageError("%v", err)
			}
			return g.Run(c.OutOrStdout(), c.ErrOrStderr())
		}}
	g.RegisterFlags(c.Flags())
	return c
}
