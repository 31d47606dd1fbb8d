package srtlaunch

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

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

type benchRunner struct {
	// validate mirrors the runner's validate_config: a recipe it rejects
	// never reaches srun there, so we refuse it here.
	validate func(b *yaml.Node) error
	command  func(s *spec, c benchCtx) ([]string, error)
	// aiperf: an AIPerfBenchmarkRunner subclass, which gets every worker
	// process's metrics URL (and AIPERF_PACKAGE) in its environment.
	aiperf bool
}

var benchRunners = map[string]benchRunner{
	"sa-bench":        {validate: validateSABench, command: saBenchCommand},
	"mooncake-router": {validate: validateMooncakeRouter, command: mooncakeRouterCommand, aiperf: true},
}

func benchTypes() []string {
	out := []string{"custom", "manual"}
	for k := range benchRunners {
		out = append(out, k)
	}
	sort.Strings(out[2:])
	return out
}

// benchValue is benchmark.<key> as a Python value (nil when absent or null).
func benchValue(b *yaml.Node, key string) (any, error) {
	n := get(b, key)
	if n == nil {
		return nil, nil
	}
	v, err := pyValue(n)
	if err != nil {
		return nil, fmt.Errorf("recipe field benchmark.%s: %v", key, err)
	}
	return v, nil
}

// pyTruthy is Python's bool(v) for the values a recipe can hold.
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *ordered:
		return len(x.keys) > 0
	}
	return true
}

// orDefault is Python's `str(v or def)`.
func orDefault(v any, def string) string {
	if pyTruthy(v) {
		return pyStr(v)
	}
	return def
}

// asFloatStr is str(float(v)): marshmallow's Float field turns 1 and "1"
// into 1.0 before the runner prints it.
func asFloatStr(v any, field string) (string, error) {
	switch x := v.(type) {
	case float64:
		return pyjson.FloatRepr(x), nil
	case int64:
		return pyjson.FloatRepr(float64(x)), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return "", fmt.Errorf("recipe field benchmark.%s: expected a number, got %q", field, x)
		}
		return pyjson.FloatRepr(f), nil
	}
	return "", fmt.Errorf("recipe field benchmark.%s: expected a number, got %s", field, pyRepr(v))
}

func requireBench(b *yaml.Node, typ string, keys ...string) error {
	for _, k := range keys {
		if get(b, k) == nil {
			return fmt.Errorf("benchmark.%s is required for %s", k, typ)
		}
	}
	return nil
}

// sa-bench (benchmarks/sa_bench.py SABenchRunner.validate_config):
// concurrencies are required, isl and osl too unless the dataset is a
// custom file, which then needs dataset_path.
func validateSABench(b *yaml.Node) error {
	ds, err := benchValue(b, "dataset_name")
	if err != nil {
		return err
	}
	if pyStr(ds) == "custom" {
		if p, err := benchValue(b, "dataset_path"); err != nil || !pyTruthy(p) {
			return fmt.Errorf("benchmark.dataset_path is required when dataset_name='custom'")
		}
		return requireBench(b, "sa-bench", "concurrencies")
	}
	return requireBench(b, "sa-bench", "isl", "osl", "concurrencies")
}

// saBenchCommand is `bash /srtctl-benchmarks/sa-bench/bench.sh` and the 19
// positional arguments its bench.sh reads (endpoint ... use_chat_template,
// dataset_name, dataset_path, reuse_http_connections), in
// SABenchRunner.build_command's order.
func saBenchCommand(s *spec, c benchCtx) ([]string, error) {
	b := s.bench
	vals := map[string]any{}
	for _, k := range []string{"isl", "osl", "concurrencies", "req_rate", "random_range_ratio", "num_prompts_mult",
		"num_warmup_mult", "custom_tokenizer", "use_chat_template", "dataset_name", "dataset_path", "reuse_http_connections"} {
		v, err := benchValue(b, k)
		if err != nil {
			return nil, err
		}
		vals[k] = v
	}
	// A list of concurrencies is joined with "x"; a string is passed as is.
	conc := ""
	switch x := vals["concurrencies"].(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyStr(e)
		}
		conc = strings.Join(parts, "x")
	default:
		conc = orDefault(x, "")
	}
	// req_rate defaults to "inf" in the schema and falls back to it when falsy.
	reqRate := "inf"
	if get(b, "req_rate") != nil {
		reqRate = orDefault(vals["req_rate"], "inf")
	}
	disagg := s.prefillWorkers > 0 || s.decodeWorkers > 0
	var total, pre, dec int
	if disagg {
		pre, dec = s.prefillWorkers*s.gpusPerPrefill, s.decodeWorkers*s.gpusPerDecode
		total = pre + dec
	} else {
		total = max(s.aggNodes, 1) * s.gpusPerNode
	}
	rrr := "0.8"
	if v := vals["random_range_ratio"]; v != nil {
		var err error
		if rrr, err = asFloatStr(v, "random_range_ratio"); err != nil {
			return nil, err
		}
	}
	numPrompts, numWarmup := "10", "2"
	if v := vals["num_prompts_mult"]; v != nil {
		numPrompts = pyStr(v)
	}
	if v := vals["num_warmup_mult"]; v != nil {
		numWarmup = pyStr(v)
	}
	chat := true // BenchmarkConfig.use_chat_template defaults to true
	if v, ok := vals["use_chat_template"].(bool); ok {
		chat = v
	}
	reuse := false // BenchmarkConfig.reuse_http_connections defaults to false
	if v, ok := vals["reuse_http_connections"].(bool); ok {
		reuse = v
	}
	args := []string{"bash", "/srtctl-benchmarks/sa-bench/bench.sh",
		fmt.Sprintf("http://localhost:%d", c.frontendPort),
		orDefault(vals["isl"], "0"), orDefault(vals["osl"], "0"), conc, reqRate,
		c.tokenizer, c.served,
		strconv.FormatBool(disagg), strconv.Itoa(total), strconv.Itoa(pre), strconv.Itoa(dec),
		rrr, numPrompts, numWarmup,
		orDefault(vals["custom_tokenizer"], ""),
		strconv.FormatBool(chat),
		orDefault(vals["dataset_name"], "random"),
		orDefault(vals["dataset_path"], ""),
		strconv.FormatBool(reuse),
	}
	if s.tokenizerMode != "" {
		// srt-slurm 4261dba6 passes benchmark.tokenizer_mode as bench.sh's
		// next positional argument, after the ones its base had.
		args = append(args, s.tokenizerMode)
	}
	return args, nil
}

var mooncakeWorkloads = map[string]bool{"mooncake": true, "conversation": true, "synthetic": true, "toolagent": true}

// mooncake-router (benchmarks/mooncake_router.py MooncakeRouterRunner):
// the workload must be a known trace and the thresholds positive.
func validateMooncakeRouter(b *yaml.Node) error {
	w, err := benchValue(b, "mooncake_workload")
	if err != nil {
		return err
	}
	if wl := orDefault(w, "conversation"); !mooncakeWorkloads[wl] {
		return fmt.Errorf("benchmark.mooncake_workload must be one of mooncake, conversation, synthetic, toolagent, got %q", wl)
	}
	for _, k := range []string{"ttft_threshold_ms", "itl_threshold_ms"} {
		v, err := benchValue(b, k)
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("recipe field benchmark.%s: expected an integer, got %s", k, pyRepr(v))
		}
		if n < 0 {
			return fmt.Errorf("benchmark.%s must be positive, got %d", k, n)
		}
	}
	return nil
}

// mooncakeRouterCommand: bench.sh ENDPOINT MODEL WORKLOAD TTFT ITL TOKENIZER.
func mooncakeRouterCommand(s *spec, c benchCtx) ([]string, error) {
	b := s.bench
	args := map[string]string{"mooncake_workload": "conversation", "ttft_threshold_ms": "2000", "itl_threshold_ms": "25"}
	for k, def := range args {
		v, err := benchValue(b, k)
		if err != nil {
			return nil, err
		}
		args[k] = orDefault(v, def)
	}
	model := c.served
	if model == "" {
		model = s.modelPath
	}
	cmd := []string{"bash", "/srtctl-benchmarks/mooncake-router/bench.sh", fmt.Sprintf("http://localhost:%d", c.frontendPort),
		model, args["mooncake_workload"], args["ttft_threshold_ms"], args["itl_threshold_ms"], c.tokenizer}
	return appendAIPerfArgs(cmd, b)
}

// appendAIPerfArgs is BenchmarkRunner.append_aiperf_args: benchmark.aiperf_args
// in YAML order, true -> --key, false dropped, anything else -> --key str(v).
func appendAIPerfArgs(cmd []string, b *yaml.Node) ([]string, error) {
	n := get(b, "aiperf_args")
	if n == nil {
		return cmd, nil
	}
	m, err := anyMap(n, "benchmark.aiperf_args")
	if err != nil {
		return nil, err
	}
	for _, k := range m.keys {
		switch v := m.anyVals[k].(type) {
		case bool:
			if v {
				cmd = append(cmd, "--"+k)
			}
		default:
			cmd = append(cmd, "--"+k, pyStr(v))
		}
	}
	return cmd, nil
}

// builtinBenchEnv is the environment srt-slurm gives its own runners
// (benchmark_stage.py _get_benchmark_env): the frontend's address, the
// runtime environment, the power windows directory and, for AIPerf
// runners, the metrics URLs of every worker process (of the agg leader's
// public port with a direct vLLM frontend), sorted, plus KVBM's port on
// prefill/agg leaders.
func builtinBenchEnv(s *spec, r benchRunner, procs []*workerProc, ns *nodes, env *ordered, public string) (*ordered, error) {
	e := newOrdered()
	e.Set("SRTCTL_FRONTEND_TYPE", s.frontendType)
	e.Set("SRT_FRONTEND_HOST", ns.addr[public])
	e.Set("SRT_FRONTEND_PORT", strconv.Itoa(frontendPublicPort))
	for _, k := range env.keys {
		e.Set(k, env.vals[k])
	}
	measurementWindowEnv(e, s)
	if s.benchType == "sa-bench" {
		if err := saBenchSlowDownEnv(e, s, procs, ns); err != nil {
			return nil, err
		}
	}
	if !r.aiperf {
		return e, nil
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
	pkg, err := benchValue(s.bench, "aiperf_package")
	if err != nil {
		return nil, err
	}
	if pyTruthy(pkg) {
		e.Set("AIPERF_PACKAGE", pyStr(pkg))
	}
	return e, nil
}

// saBenchSlowDownEnv is benchmark_stage._get_sa_bench_slow_down_env: with
// both slow_down times positive and the SGLang router in front, SA-Bench
// gets the decode leaders' URLs to POST /slow_down to.
func saBenchSlowDownEnv(e *ordered, s *spec, procs []*workerProc, ns *nodes) error {
	sleep, err := benchValue(s.bench, "slow_down_sleep_time")
	if err != nil {
		return err
	}
	wait, err := benchValue(s.bench, "slow_down_wait_time")
	if err != nil || sleep == nil || wait == nil || s.frontendType != "sglang" {
		return err
	}
	sl, err := asFloatStr(sleep, "slow_down_sleep_time")
	if err != nil {
		return err
	}
	wt, err := asFloatStr(wait, "slow_down_wait_time")
	if err != nil {
		return err
	}
	if f, _ := strconv.ParseFloat(sl, 64); f <= 0 {
		return nil
	}
	if f, _ := strconv.ParseFloat(wt, 64); f <= 0 {
		return nil
	}
	var urls []string
	for _, wp := range procs {
		if wp.rank == 0 && wp.ep.mode == "decode" {
			urls = append(urls, fmt.Sprintf("http://%s:%d", ns.addr[wp.node], wp.httpPort))
		}
	}
	if len(urls) == 0 {
		return nil
	}
	e.Set("SA_BENCH_SLOW_DOWN_URLS", strings.Join(urls, ","))
	e.Set("SA_BENCH_SLOW_DOWN_SLEEP_TIME", sl)
	e.Set("SA_BENCH_SLOW_DOWN_WAIT_TIME", wt)
	return nil
}
