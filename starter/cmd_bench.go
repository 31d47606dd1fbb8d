package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

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
	g := bench.NewTraceGen()
	c := &cobra.Command{Use: "trace-gen", Short: "write a deterministic synthetic AgentX trace (corpus format, JSONL) for bench --trace",
		Long: traceGenUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := g.Validate(); err != nil {
				return usageError("%v", err)
			}
			return g.Run(c.OutOrStdout(), c.ErrOrStderr())
		}}
	bindTraceGenFlags(c.Flags(), &g)
	return c
}

// traceGenUsage is the help text of `starter bench trace-gen`.
const traceGenUsage = `usage: starter bench trace-gen [--traces N --calls N --seed S] [--out F.jsonl]

Writes deterministic synthetic traces in the AgentX corpus format
(semianalysisai/cc-traces-weka-*: one session per line, {id, models,
block_size: 64, hash_id_scope, requests: [{t, type, model, in, out,
hash_ids, api_time}]}) shaped like the corpus: main-agent calls with tens of
thousands of prompt tokens that mostly resend the session's context, replies
of a few hundred to about 2,000 tokens, and subagents making short calls.
This is the default workload of agentic points. The same flags always give
the same file; a summary of its shape goes to stderr.`

// bindTraceGenFlags adds the command's flags to fs, with g's values
// (bench.NewTraceGen) as their defaults.
func bindTraceGenFlags(fs *flag.FlagSet, g *bench.TraceGen) {
	fs.IntVar(&g.Traces, "traces", g.Traces, "number of traces (sessions)")
	fs.Int64Var(&g.Seed, "seed", g.Seed, "generator seed")
	fs.StringVar(&g.Out, "out", "", "output file (default stdout)")
	shape := &g.Shape
	fs.IntVar(&shape.MainCalls, "calls", shape.MainCalls, "main-agent calls per trace")
	fs.IntVar(&shape.SystemTokens, "system-tokens", shape.SystemTokens, "system prompt tokens opening every main call")
	fs.IntVar(&shape.ToolTokens, "tool-tokens", shape.ToolTokens, "tool-definition tokens after the system prompt")
	fs.IntVar(&shape.MinOut, "min-out", shape.MinOut, "shortest main-agent reply")
	fs.IntVar(&shape.MaxOut, "max-out", shape.MaxOut, "longest main-agent reply")
	fs.IntVar(&shape.MaxContext, "max-context", shape.MaxContext, "compact a session's context when a prompt would exceed this")
	fs.IntVar(&shape.SubagentEvery, "subagent-every", shape.SubagentEvery, "a subagent after about one main call in this many (0: none)")
}
