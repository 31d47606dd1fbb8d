package srtlaunch

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// srt-slurm's own benchmark runners (srtctl/benchmarks/*.py): each runs a
// script srt-slurm ships under /srtctl-benchmarks with positional arguments
// built from the recipe's benchmark section. They run on the benchmark node
// in the job's engine container, with the runtime mounts and the recipe's
// srun options, like the custom runner.

// benchCtx is what a runner's argv may depend on besides the recipe.
type benchCtx struct {
	frontendPort int
	tokenizer    string // the HF id for hf: models, else /model
	served       string // the served model name srt-slurm resolves
}

// benchRunner is one of srt-slurm's runners.
type benchRunner struct {
	// validate mirrors the runner's validate_config (config has refused bad
	// values): a recipe it rejects never reaches srun there, so we refuse it.
	validate func(b config.Benchmark) error
	command  func(s *spec, c benchCtx) []string
	// aiperf: an AIPerfBenchmarkRunner subclass, which gets every worker
	// process's metrics URL (and AIPERF_PACKAGE) in its environment.
	aiperf bool
}

var benchRunners = map[string]benchRunner{
	"sa-bench":        {validate: validateSABench, command: saBenchCommand},
	"mooncake-router": {validate: func(config.Benchmark) error { return nil }, command: mooncakeRouterCommand, aiperf: true},
}

func benchTypes() []string {
	out := []string{"custom", "manual"}
	for k := range benchRunners {
		out = append(out, k)
	}
	sort.Strings(out[2:])
	return out
}

// orDefault is Python's `str(v or def)`.
func orDefault(v any, def string) string {
	if config.Truthy(v) {
		return pyStr(v)
	}
	return def
}

// validateSABench is SABenchRunner.validate_config: concurrencies are
// required, isl and osl too unless the dataset is a custom file, which then
// needs dataset_path.
func validateSABench(b config.Benchmark) error {
	sa := b.SABench
	need := map[string]any{"isl": sa.ISL, "osl": sa.OSL, "concurrencies": sa.Concurrencies}
	order := []string{"isl", "osl", "concurrencies"}
	if pyStr(sa.DatasetName) == "custom" {
		if !config.Truthy(sa.DatasetPath) {
			return fmt.Errorf("benchmark.dataset_path is required when dataset_name='custom'")
		}
		order = order[2:]
	}
	for _, k := range order {
		if need[k] == nil {
			return fmt.Errorf("benchmark.%s is required for sa-bench", k)
		}
	}
	return nil
}

// saBenchCommand is `bash /srtctl-benchmarks/sa-bench/bench.sh` and the 19
// positional arguments its bench.sh reads (endpoint ... use_chat_template,
// dataset_name, dataset_path, reuse_http_connections), in
// SABenchRunner.build_command's order.
func saBenchCommand(s *spec, c benchCtx) []string {
	b := s.Benchmark.SABench
	// A list of concurrencies is joined with "x"; a string is passed as is.
	conc := ""
	switch x := b.Concurrencies.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyStr(e)
		}
		conc = strings.Join(parts, "x")
	default:
		conc = orDefault(x, "")
	}
	disagg := s.prefillWorkers > 0 || s.decodeWorkers > 0
	var total, pre, dec int
	if disagg {
		pre, dec = s.prefillWorkers*s.gpusPerPrefill, s.decodeWorkers*s.gpusPerDecode
		total = pre + dec
	} else {
		total = max(s.Roles.Agg.Nodes, 1) * s.gpusPerNode
	}
	numPrompts, numWarmup := "10", "2"
	if b.NumPromptsMult != nil {
		numPrompts = pyStr(b.NumPromptsMult)
	}
	if b.NumWarmupMult != nil {
		numWarmup = pyStr(b.NumWarmupMult)
	}
	args := []string{"bash", "/srtctl-benchmarks/sa-bench/bench.sh",
		fmt.Sprintf("http://localhost:%d", c.frontendPort),
		orDefault(b.ISL, "0"), orDefault(b.OSL, "0"), conc,
		orDefault(b.ReqRate, "inf"), // the schema's default, and the fallback when falsy
		c.tokenizer, c.served,
		strconv.FormatBool(disagg), strconv.Itoa(total), strconv.Itoa(pre), strconv.Itoa(dec),
		pyjson.FloatRepr(b.RandomRangeRatio), numPrompts, numWarmup,
		orDefault(b.CustomTokenizer, ""),
		strconv.FormatBool(b.UseChatTemplate),
		orDefault(b.DatasetName, "random"),
		orDefault(b.DatasetPath, ""),
		strconv.FormatBool(b.ReuseHTTPConnections),
	}
	if b.TokenizerMode != "" {
		// srt-slurm 4261dba6 passes benchmark.tokenizer_mode as bench.sh's
		// next positional argument, after the ones its base had.
		args = append(args, b.TokenizerMode)
	}
	return args
}

// mooncakeRouterCommand: bench.sh ENDPOINT MODEL WORKLOAD TTFT ITL TOKENIZER.
func mooncakeRouterCommand(s *spec, c benchCtx) []string {
	b := s.Benchmark.MooncakeRouter
	model := c.served
	if model == "" {
		model = s.Model.Path
	}
	cmd := []string{"bash", "/srtctl-benchmarks/mooncake-router/bench.sh", fmt.Sprintf("http://localhost:%d", c.frontendPort),
		model, b.Workload, strconv.Itoa(b.TTFTThresholdMs), strconv.Itoa(b.ITLThresholdMs), c.tokenizer}
	return appendAIPerfArgs(cmd, s.Benchmark.AIPerfArgs)
}

// appendAIPerfArgs is BenchmarkRunner.append_aiperf_args: benchmark.aiperf_args
// in YAML order, true -> --key, false dropped, anything else -> --key str(v).
func appendAIPerfArgs(cmd []string, m *config.Map) []string {
	for _, k := range keysOf(m) {
		switch v := m.Vals[k].(type) {
		case bool:
			if v {
				cmd = append(cmd, "--"+k)
			}
		default:
			cmd = append(cmd, "--"+k, pyStr(v))
		}
	}
	return cmd
}

// builtinBenchEnv is the environment srt-slurm gives its own runners
// (benchmark_stage.py _get_benchmark_env): the frontend's address, the
// runtime environment, the power windows directory and, for AIPerf
// runners, the metrics URLs of every worker process (of the agg leader's
// public port with a direct vLLM frontend), sorted, plus KVBM's port on
// prefill/agg leaders.
func builtinBenchEnv(s *spec, r benchRunner, procs []*workerProc, ns *nodes, env *config.Map, public string) *config.Map {
	e := config.NewMap()
	e.Set("SRTCTL_FRONTEND_TYPE", s.frontendType)
	e.Set("SRT_FRONTEND_HOST", ns.addr[public])
	e.Set("SRT_FRONTEND_PORT", strconv.Itoa(frontendPublicPort))
	for _, k := range env.Keys {
		e.Set(k, env.Vals[k])
	}
	measurementWindowEnv(e, s)
	if sa := s.Benchmark.SABench; sa != nil {
		saBenchSlowDownEnv(e, s, sa, procs, ns)
	}
	if !r.aiperf {
		return e
	}
	var urls []string
	if s.frontendType == "vllm" {
		for _, wp := range procs {
			if wp.ep.mode == "agg" && wp.rank == 0 {
				urls = append(urls, fmt.Sprintf("http://%s:%d/metrics", ns.addr[wp.node], frontendPublicPort))
			}
		}
	}
	if len(urls) == 0 {
		for _, wp := range procs {
			if wp.sysPort > 0 {
				urls = append(urls, fmt.Sprintf("http://%s:%d/metrics", ns.addr[wp.node], wp.sysPort))
			}
		}
		urls = append(urls, kvbmMetricsURLs(s, procs, ns)...)
	}
	if len(urls) > 0 {
		urls = dedupe(urls)
		sort.Strings(urls)
		e.Set("AIPERF_SERVER_METRICS_URLS", strings.Join(urls, ","))
	}
	if pkg := s.Benchmark.AIPerfPackage; pkg != "" {
		e.Set("AIPERF_PACKAGE", pkg)
	}
	return e
}

// saBenchSlowDownEnv is benchmark_stage._get_sa_bench_slow_down_env: with
// both slow_down times positive and the SGLang router in front, SA-Bench
// gets the decode leaders' URLs to POST /slow_down to.
func saBenchSlowDownEnv(e *config.Map, s *spec, sa *config.SABench, procs []*workerProc, ns *nodes) {
	if sa.SlowDownSleep <= 0 || sa.SlowDownWait <= 0 || s.frontendType != "sglang" {
		return
	}
	var urls []string
	for _, wp := range procs {
		if wp.rank == 0 && wp.ep.mode == "decode" {
			urls = append(urls, fmt.Sprintf("http://%s:%d", ns.addr[wp.node], wp.httpPort))
		}
	}
	if len(urls) == 0 {
		return
	}
	e.Set("SA_BENCH_SLOW_DOWN_URLS", strings.Join(urls, ","))
	e.Set("SA_BENCH_SLOW_DOWN_SLEEP_TIME", pyjson.FloatRepr(sa.SlowDownSleep))
	e.Set("SA_BENCH_SLOW_DOWN_WAIT_TIME", pyjson.FloatRepr(sa.SlowDownWait))
}
