package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/bench"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/sim"
)

func init() {
	register("bench", newBenchCmd)
	register("bench trace-gen", newBenchTraceGenCmd)
}

func newBenchCmd() *cobra.Command {
	var e bench.Endpoint
	c := &cobra.Command{Use: "bench", Short: "benchmark an OpenAI-compatible endpoint (InferenceX metrics, vllm bench serve flags)", Long: endpointUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := e.Options()
			if err != nil {
				return usageError("%v", err)
			}
			return e.Run(c.Context(), opts, c.OutOrStdout(), c.ErrOrStderr())
		}}
	bindEndpointFlags(c.Flags(), &e)
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

// endpointUsage is the help text of `starter bench`.
const endpointUsage = `usage: starter bench --base-url URL [--concurrency N] [--isl N --osl N | --trace F.jsonl] [flags]

--trace replays AgentX traces (the cc-traces-weka corpus format) the way
InferenceX's aiperf scenario does: one session per concurrency lane, first
sessions starting between 25% and 75% of their trace after --num-warmups
warmup calls per lane, idle gaps capped at --idle-gap-cap, prompts built so
that equal hash ids are equal token blocks.

Streams requests at an OpenAI-compatible server and reports TTFT, TPOT,
ITL, E2EL (mean/median/p90/p99/p99.9), interactivity and per-GPU throughput
with InferenceX's definitions. --output-json writes the aggregate (InferenceX
agg_*.json field names, latencies in seconds); --save-requests one JSONL
record per request. Exit status: 0 ok, 1 error or gate failed (more than 10%
of requests failed, or none succeeded), 2 usage.`

// bindEndpointFlags adds the command's flags, with their defaults, to fs.
func bindEndpointFlags(fs *flag.FlagSet, f *bench.Endpoint) {
	fs.StringVar(&f.BaseURL, "base-url", "http://127.0.0.1:8000", "server base URL")
	fs.StringVar(&f.Path, "endpoint", "/v1/chat/completions", "API endpoint: /v1/chat/completions or /v1/completions")
	fs.StringVar(&f.Model, "model", "", "model name (default: the first model the server lists)")
	fs.IntVar(&f.Concurrency, "concurrency", 1, "requests in flight (closed loop), in-flight cap (open loop), or live sessions (--trace)")
	fs.IntVar(&f.NumPrompts, "num-prompts", 0, "measured requests (default 10 x concurrency; unlimited with --duration); with --trace, trace plays (default: one per trace)")
	fs.IntVar(&f.NumWarmups, "num-warmups", -1, "warmup requests excluded from metrics (default 2 x concurrency); with --trace, warmup calls per lane (default 1; InferenceX: 10)")
	fs.StringVar(&f.RequestRate, "request-rate", "inf", "requests/s on a Poisson/gamma schedule, or inf for closed loop")
	fs.Float64Var(&f.Burstiness, "burstiness", 1, "gamma shape of inter-arrival times (1 = Poisson, <1 burstier)")
	fs.DurationVar(&f.Duration, "duration", 0, "stop dispatching after this long; in-flight requests finish (0 = no limit)")
	fs.IntVar(&f.ISL, "isl", 1024, "input length in tokens (random workload)")
	fs.IntVar(&f.OSL, "osl", 1024, "output length in tokens, sent as max_tokens (random workload)")
	fs.Float64Var(&f.RangeRatio, "random-range-ratio", 1, "lengths uniform in [ratio x L, L]; InferenceX uses 0.8")
	fs.BoolVar(&f.IgnoreEOS, "ignore-eos", false, "send ignore_eos so every request generates max_tokens (always on with --trace)")
	fs.StringVar(&f.OutputJSON, "output-json", "", "write the aggregate JSON here")
	fs.StringVar(&f.SaveRequests, "save-requests", "", "write one JSONL record per request here")
	fs.StringVar(&f.OutputDir, "output-dir", "", "directory for both files (default names aggregate.json and requests.jsonl)")
	fs.StringVar(&f.Trace, "trace", "", "AgentX trace (cc-traces-weka format: JSONL, or a JSON object or array) to replay instead of random prompts")
	fs.Float64Var(&f.TrajectoryStartMin, "trajectory-start-min", loadgen.DefaultTrajectoryStartMin, "with --trace: earliest start of a lane's first session, as a fraction of its trace")
	fs.Float64Var(&f.TrajectoryStartMax, "trajectory-start-max", loadgen.DefaultTrajectoryStartMax, "with --trace: latest start of a lane's first session (0 with min 0: from the beginning, no warmup)")
	fs.DurationVar(&f.IdleGapCap, "idle-gap-cap", loadgen.DefaultIdleGapCap, "with --trace: cap on recorded idle gaps between calls (negative: none)")
	fs.Int64Var(&f.Seed, "seed", 0, "seed for prompts, lengths and arrival times")
	fs.IntVar(&f.PrefillGPUs, "prefill-gpus", 0, "prefill GPUs, for per-GPU input throughput (disaggregated)")
	fs.IntVar(&f.DecodeGPUs, "decode-gpus", 0, "decode GPUs, for per-GPU output throughput (disaggregated)")
	fs.IntVar(&f.TotalGPUs, "total-gpus", 0, "all GPUs (aggregated serving: the only count needed)")
	fs.StringVar(&f.Deployment, "deployment", "", `topology giving the GPU counts, e.g. "2P1D DEP16/DEP32" or "TP8 agg"`)
	fs.IntVar(&f.GPUsPerNode, "gpus-per-node", sim.DefaultGPUsPerNode, "GPUs per node for --deployment (node count only)")
	fs.DurationVar(&f.RequestTimeout, "request-timeout", loadgen.DefaultRequestTimeout, "per-request deadline")
	fs.Float64Var(&f.ClockScale, "clock-scale", 0, "rate of the server's clock against real time (the simulator's --time-scale); figures are converted to it. 0: ask the simulator's /sim/info, 1 for any other server")
	fs.Float64Var(&f.TimeScale, "time-scale", 1, "multiply trace idle gaps (after the cap) by this")
	fs.BoolVar(&f.JSON, "json", false, "print the aggregate JSON on stdout instead of the table")
	fs.BoolVar(&f.NoProgress, "no-progress", false, "do not draw the progress line on a terminal")
	fs.StringVar(&f.ExtraBody, "extra-body", "", `JSON object merged into every request body, e.g. '{"temperature":0}'`)
}
