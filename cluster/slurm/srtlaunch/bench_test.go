package srtlaunch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

// Expected values follow srt-slurm's runners: benchmarks/sa_bench.py
// (SABenchRunner.build_command), benchmarks/mooncake_router.py
// (MooncakeRouterRunner.build_command) and cli/mixins/benchmark_stage.py
// (_get_benchmark_env, _get_aiperf_server_metrics_env).
func TestBuiltinBenchmarks(t *testing.T) {
	tests := []struct {
		recipe   string
		nodes    int
		outputs  []string
		command  []string
		envKeys  []string
		env      map[string]string
		nodelist string
	}{
		{
			recipe: "sabench-disagg.yaml", nodes: 3,
			outputs: []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-01_prefill_w1.out", "gb200-02_prefill_w2.out",
				"gb200-02_prefill_w3.out", "gb200-03_decode_w0.out", "gb200-01_frontend_0.out", "benchmark.out"},
			// GPUs: 4 prefill x 2 + 1 decode x 4; served name from prefill.
			command: []string{"bash", "/srtctl-benchmarks/sa-bench/bench.sh", "http://localhost:8000", "1024", "128", "4x8x32", "700",
				"/model", "org/Tiny", "true", "12", "8", "4", "0.8", "10", "2", "", "true", "random", "", "false"},
			// No benchmark.env for srt-slurm's own runners.
			envKeys:  []string{"SRTCTL_FRONTEND_TYPE", "SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "GLOBAL"},
			env:      map[string]string{"SRTCTL_FRONTEND_TYPE": "dynamo", "SRT_FRONTEND_HOST": "10.0.0.1", "SRT_FRONTEND_PORT": "8000", "GLOBAL": "g"},
			nodelist: "gb200-01",
		},
		{
			recipe: "sabench-agg.yaml", nodes: 2,
			outputs: []string{"infra.out", "gb200-01_agg_w0.out", "gb200-02_agg_w0.out", "gb200-01_nginx.out",
				"gb200-02_frontend_0.out", "benchmark.out"},
			// Aggregated: total = agg_nodes x gpus_per_node, no split; hf id as tokenizer;
			// a custom dataset without isl/osl passes 0 for them; reuse_http_connections last.
			command: []string{"bash", "/srtctl-benchmarks/sa-bench/bench.sh", "http://localhost:8000", "0", "0", "16x64", "inf",
				"org/Tiny-1B", "Tiny-1B", "false", "8", "0", "0", "1.0", "5", "0", "pkg.mod.Tok", "false", "custom", "/data/prompts.jsonl", "true"},
			envKeys:  []string{"SRTCTL_FRONTEND_TYPE", "SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT"},
			nodelist: "gb200-01",
		},
		{
			recipe: "mooncake.yaml", nodes: 10,
			// aiperf_args follow in YAML order: true -> flag, false dropped, null -> "None" (str()).
			command: []string{"bash", "/srtctl-benchmarks/mooncake-router/bench.sh", "http://localhost:8000", "Tiny-1B", "toolagent",
				"2000", "40", "/model", "--streaming", "--request-count", "100", "--extra", "None"},
			// The recipe's own AIPERF_SERVER_METRICS_URLS keeps its place but loses its value (dict.update).
			envKeys: []string{"SRTCTL_FRONTEND_TYPE", "SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "AIPERF_SERVER_METRICS_URLS", "AIPERF_PACKAGE"},
			env: map[string]string{
				"AIPERF_SERVER_METRICS_URLS": "http://10.0.0.10:7509/metrics,http://10.0.0.1:6880/metrics,http://10.0.0.1:7500/metrics," +
					"http://10.0.0.2:7501/metrics,http://10.0.0.3:7502/metrics,http://10.0.0.4:7503/metrics,http://10.0.0.5:7504/metrics," +
					"http://10.0.0.6:7505/metrics,http://10.0.0.7:7506/metrics,http://10.0.0.8:7507/metrics,http://10.0.0.9:7508/metrics",
				"AIPERF_PACKAGE": "aiperf>=0.7",
			},
			nodelist: "gb200-01",
		},
	}
	for _, tt := range tests {
		t.Run(tt.recipe, func(t *testing.T) {
			procs := render(t, tt.recipe, tt.nodes, 0)
			if tt.outputs != nil {
				assert.Equal(t, tt.outputs, outputs(procs))
			}
			b := procs[len(procs)-1]
			require.Equal(t, RoleBenchmark, b.Role)
			assert.Equal(t, tt.command, b.Command)
			assert.Equal(t, tt.envKeys, b.EnvKeys())
			for k, v := range tt.env {
				assert.Equal(t, v, env(b)[k], k)
			}
			assert.Equal(t, []string{tt.nodelist}, b.Nodelist)
			assert.Equal(t, "{CONTAINER_IMAGE}", b.ContainerImage, "the job's image, not benchmark.container_image")
			assert.Equal(t, procs[1].ContainerMounts.Keys, b.ContainerMounts.Keys)
			payload := b.Argv[len(b.Argv)-1]
			assert.True(t, strings.HasPrefix(payload, "export SRTCTL_FRONTEND_TYPE=dynamo && "), payload)
			assert.True(t, strings.HasSuffix(payload, " && "+shJoin(tt.command)), payload)
		})
	}
}

func TestSABenchLayoutDetails(t *testing.T) {
	procs := render(t, "sabench-disagg.yaml", 3, 0)
	p1, fe, b := procs[2], procs[6], procs[7]
	assert.Equal(t, "2,3", env(p1)["CUDA_VISIBLE_DEVICES"])
	assert.Contains(t, p1.CommandLine(), "--port 6132 --nccl-port 17501 --disaggregation-mode prefill --disaggregation-bootstrap-port 7201 ")
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000", "--router-mode", "kv", "--router-reset-states"}, fe.Command)
	assert.Equal(t, []string{"mem"}, b.SrunOptions.Keys, "the benchmark gets the recipe's srun options")
	assert.NotNil(t, p1.BashPreamble, "top_of_tree installs dynamo")
}

func TestBuiltinBenchmarkErrors(t *testing.T) {
	base := "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpus_per_node: 4, agg_nodes: 1, agg_workers: 1}\nbackend: {type: sglang}\n"
	tests := []struct{ name, bench, want string }{
		// The runners' validate_config: what a run needs, when it is launched.
		{"sa-bench without isl", "{type: sa-bench, osl: 1, concurrencies: '1'}", "benchmark.isl is required for sa-bench"},
		{"sa-bench without concurrencies", "{type: sa-bench, isl: 1, osl: 1}", "benchmark.concurrencies is required for sa-bench"},
		{"custom dataset without path", "{type: sa-bench, dataset_name: custom, concurrencies: '1'}", "benchmark.dataset_path is required"},
		// Values they refuse, when the recipe is read.
		{"bad mooncake workload", "{type: mooncake-router, mooncake_workload: chat}", "x.yaml:5: benchmark.mooncake_workload: must be one of"},
		{"negative threshold", "{type: mooncake-router, ttft_threshold_ms: -5}", "x.yaml:5: benchmark.ttft_threshold_ms: must be positive"},
		// What the launcher does not render.
		{"unknown type", "{type: lm-eval}", `benchmark.type "lm-eval" is not supported by the engine launcher yet (custom, manual, mooncake-router, sa-bench)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := config.ParseRecipe("x.yaml", []byte(base+"benchmark: "+tt.bench+"\n"), "")
			if err == nil {
				_, err = Render(r, PlaceholderAllocation(r, 1), Options{Paths: PlaceholderPaths("M")})
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "x.yaml", "names the recipe")
		})
	}
}

// A zip_override variant (config.applySelector) renders like a plain recipe:
// the zipped values reach the worker flags and the sa-bench argv.
func TestOverrideVariantWithSABench(t *testing.T) {
	tests := []struct {
		selector   string
		nodes      int
		name       string
		decodeTail []string
		conc, gpus string
	}{
		{"zip_override_lat[0]", 3, "lat-a", []string{"--deepep-mode", "low_latency", "--disaggregation-mode", "decode", "--max-running-requests", "16"}, "8x16", "12"},
		{"zip_override_lat[1]", 2, "lat-b", []string{"--disaggregation-mode", "decode", "--max-running-requests", "4"}, "4", "8"},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			procs := render(t, "override-sa.yaml:"+tt.selector, tt.nodes, 0)
			assert.Equal(t, []string{"python3", "/tmp/setup_head.py", "--name", tt.name, "--log-dir", "{LOG_DIR}"}, procs[0].Command)
			d := procs[2]
			require.Equal(t, RoleDecode, d.Role)
			i := indexOf(d.Command, "--request-plane")
			assert.Equal(t, append([]string{"--request-plane", "tcp"}, tt.decodeTail...), d.Command[i:], "dynamo.request_plane drives the flag")
			assert.Equal(t, "nats", env(d)["DYN_REQUEST_PLANE"], "the recipe's env block overrides the base value in place")
			assert.Equal(t, 4, indexOf(d.EnvKeys(), "DYN_REQUEST_PLANE"))
			b := procs[len(procs)-1]
			assert.Equal(t, []string{"http://localhost:8000", "1024", "1024", tt.conc, "inf", "/model", "Tiny-Z", "true", tt.gpus, "4"},
				b.Command[2:12])
			assert.Equal(t, "1.0", b.Command[13])
		})
	}
}

// An SGLang recipe serves its served-model-name (the first found in
// prefill, aggregated, decode), and the render tells clients so.
func TestRenderServedModel(t *testing.T) {
	rec := load(t, "sabench-disagg.yaml")
	r, err := Render(rec, PlaceholderAllocation(rec, 3), Options{Paths: PlaceholderPaths("Tiny-1B"), JobID: "7"})
	require.NoError(t, err)
	assert.Equal(t, "org/Tiny", r.ServedModel)
}
