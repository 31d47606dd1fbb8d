package srtlaunch

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

func load(t *testing.T, name string) *config.Recipe {
	t.Helper()
	r, err := config.LoadRecipe("testdata", name)
	require.NoError(t, err)
	return r
}

func render(t *testing.T, name string, nodes int, al float64) []*Process {
	t.Helper()
	rec := load(t, name)
	procs, err := Render(rec, PlaceholderAllocation(rec, nodes), Options{SyntheticAL: al, Paths: PlaceholderPaths("Tiny-1B"), JobID: "7"})
	require.NoError(t, err)
	return procs.Processes
}

func outputs(procs []*Process) []string {
	var out []string
	for _, p := range procs {
		out = append(out, strings.TrimPrefix(p.Output, "{LOG_DIR}/"))
	}
	return out
}

func env(p *Process) map[string]string {
	m := map[string]string{}
	for _, k := range p.EnvKeys() {
		m[k], _ = p.EnvValue(k)
	}
	return m
}

func TestLayouts(t *testing.T) {
	tests := []struct {
		recipe string
		nodes  int
		want   []string
	}{
		{"agg.yaml", 1, []string{"infra.out", "gb200-01_agg_w0.out", "gb200-01_agg_w1.out", "gb200-01_frontend_0.out"}},
		{"1p1d.yaml", 4, []string{"infra.out", "gb200-02_prefill_w0.out", "gb200-03_decode_w0.out", "gb200-04_decode_w0.out",
			"gb200-02_frontend_0.out", "benchmark.out"}},
		{"2p1d.yaml", 3, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-01_prefill_w1.out", "gb200-02_decode_w0.out",
			"gb200-03_decode_w0.out", "gb200-01_nginx.out", "gb200-02_frontend_0.out", "gb200-03_frontend_1.out", "benchmark.out"}},
	}
	for _, tt := range tests {
		t.Run(tt.recipe, func(t *testing.T) {
			assert.Equal(t, tt.want, outputs(render(t, tt.recipe, tt.nodes, 0)))
		})
	}
}

func TestAggPackedWorkers(t *testing.T) {
	procs := render(t, "agg.yaml", 1, 0)
	w0, w1 := procs[1], procs[2]
	assert.Equal(t, "0,1", env(w0)["CUDA_VISIBLE_DEVICES"], "a worker using part of a node sees only its GPUs")
	assert.Equal(t, "2,3", env(w1)["CUDA_VISIBLE_DEVICES"])
	assert.Contains(t, w0.CommandLine(), "--port 6100 --nccl-port 17500 --dump-config-to")
	assert.Contains(t, w1.CommandLine(), "--port 6132 --nccl-port 17501 --dump-config-to", "second leader on a node: next HTTP port")
	assert.NotContains(t, w0.CommandLine(), "--dist-init-addr", "single-node workers have no dist init")
	assert.Equal(t, "gb200-01", env(w0)["WORKER_NODE"])
	assert.Equal(t, "0", env(w0)["WORKER_ID"])
	assert.Equal(t, "{kept} {unknown}", env(w0)["LITERAL"], "format_map: {{ unescapes, unknown fields stay")
	assert.Nil(t, w0.BashPreamble, "dynamo.install false: no install")
	assert.Equal(t, 0, w0.SrunExportEnv.Len())
	fe := procs[3]
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000"}, fe.Command, "one node: a single frontend on the public port")
	assert.Equal(t, "--served-model-name Tiny-1B", w0.Command[5]+" "+w0.Command[6], "default served name: the model directory's name")
}

func TestDisaggDedicatedInfra(t *testing.T) {
	procs := render(t, "1p1d.yaml", 4, 0)
	infra, prefill, d0, d1, fe, bench := procs[0], procs[1], procs[2], procs[3], procs[4], procs[5]
	assert.Equal(t, []string{"gb200-01"}, infra.Nodelist, "dedicated node runs only infra")
	assert.Equal(t, "10.0.0.2", env(prefill)["HEAD_NODE_IP"], "head is the first worker node")
	assert.Equal(t, "http://gb200-01:2379", env(prefill)["ETCD_ENDPOINTS"])
	assert.Equal(t, "nats", env(prefill)["DYN_REQUEST_PLANE"])
	assert.Equal(t, []string{"HEAD_NODE_IP", "ETCD_ENDPOINTS", "NATS_SERVER", "DYN_SYSTEM_PORT", "DYN_REQUEST_PLANE",
		"DYN_SKIP_SGLANG_LOG_FORMATTING", "DYN_LOG", "P", "GLOBAL"}, prefill.EnvKeys())
	assert.Equal(t, []string{"python3", "-m", "dynamo.sglang", "--model-path", "org/Tiny-1B", "--served-model-name", "tiny",
		"--host", "0.0.0.0", "--port", "6100", "--nccl-port", "17500", "--disaggregation-mode", "prefill",
		"--disaggregation-bootstrap-port", "7200", "--dump-config-to", "{LOG_DIR}/gb200-02_config.json", "--request-plane", "nats",
		"--disaggregation-mode", "prefill", "--tp-size", "4"}, prefill.Command, "hf: model id, served name from decode, duplicate flag kept")
	assert.Contains(t, d0.CommandLine(), "--port 6100 --nccl-port 17501 --disaggregation-mode decode --dist-init-addr 10.0.0.3:8300 --nnodes 2 --node-rank 0")
	assert.Contains(t, d1.CommandLine(), "--port 0 --nccl-port 17502 --disaggregation-mode decode --dist-init-addr 10.0.0.3:8300 --nnodes 2 --node-rank 1")
	assert.NotContains(t, prefill.ContainerMounts.Keys, "{MODEL_DIR:Tiny-1B}", "hf models are not mounted")
	assert.Equal(t, []string{"gb200-02"}, fe.Nodelist, "multiple frontends off: one on the head")
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000", "--router-mode", "kv"}, fe.Command)
	assert.Equal(t, []string{"gb200-02"}, bench.Nodelist)
	assert.Equal(t, []string{"SRT_PREFILL_IPS", "SRT_PREFILL_ENDPOINTS", "SRT_DECODE_IPS", "SRT_DECODE_ENDPOINTS", "SRTCTL_FRONTEND_TYPE",
		"SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "GLOBAL", "AIPERF_SERVER_METRICS_URLS", "CONC"}, bench.EnvKeys())
	assert.Equal(t, "http://10.0.0.2:7500/metrics,http://10.0.0.3:7501/metrics", env(bench)["AIPERF_SERVER_METRICS_URLS"], "leaders only")
	assert.Contains(t, *prefill.BashPreamble, "ai-dynamo==0.9.1", "dynamo.version: pip install")
	assert.Equal(t, "srun --jobid 7 --overlap --nodes 1", strings.Join(prefill.Argv[:6], " "))
}

func TestTwoPrefillOneDecodeNginx(t *testing.T) {
	procs := render(t, "2p1d.yaml", 3, 0)
	p0, p1, nginx, fe0 := procs[1], procs[2], procs[5], procs[6]
	assert.Contains(t, p0.CommandLine(), "--port 6100 --nccl-port 17500 --disaggregation-mode prefill --disaggregation-bootstrap-port 7200 ")
	assert.Contains(t, p1.CommandLine(), "--port 6132 --nccl-port 17501 --disaggregation-mode prefill --disaggregation-bootstrap-port 7201 ")
	assert.Equal(t, "ai_dynamo-1.2.0-py3-none-any.whl", env(p0)["DYNAMO_WHEEL_NAME"])
	assert.Equal(t, []string{"mem", "exclusive"}, p0.SrunOptions.Keys)
	assert.Contains(t, p0.Argv, "--mem=0")
	assert.Contains(t, p0.Argv, "--exclusive")
	assert.Contains(t, p0.Argv, "--export=ALL,ENROOT_REMAP_ROOT=yes")
	assert.Equal(t, []string{"container-remap-root"}, nginx.SrunOptions.Keys, "nginx never gets the recipe's srun options")
	assert.Equal(t, "nginx:1.27.4", nginx.ContainerImage)
	assert.Equal(t, "--http-port=8180", fe0.Command[3], "frontends behind nginx use the internal port")
	assert.Equal(t, 0, fe0.SrunOptions.Len(), "frontends do not get the recipe's srun options")
	assert.Equal(t, "pmix", *fe0.MPI)
	assert.Equal(t, "1", env(fe0)["FE"])
	assert.Equal(t, "true", procs[8].Command[2])
}

func TestFlagRendering(t *testing.T) {
	procs := render(t, "flags.yaml", 1, 0)
	w := procs[1]
	i := indexOf(w.Command, "--request-plane")
	require.Positive(t, i)
	assert.Equal(t, []string{"--kv-events-config", `{"publisher": "zmq", "topic": "kv-events", "endpoint": "tcp://*:5200"}`}, w.Command[i-2:i])
	assert.Equal(t, []string{
		"--request-plane", "tcp",
		"--big", "1.5e+20",
		"--cuda-graph-bs", "1", "2", "4",
		"--json-override", `{'a': 1, 'b': "it's"}`,
		"--mem-fraction-static", "0.85",
		"--mixed", "True", "0.5", "x",
		"--octal", "8",
		"--port", "9999",
		"--quoted", "yes",
		"--small", "1e-05",
		"--whole", "2.0",
		"--yes-word",
		"--zeta-flag",
	}, w.Command[i:])
	assert.Equal(t, "tiny-served", w.Command[6])
	fe := procs[len(procs)-1]
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000", "--router-mode", "kv", "--verbose", "--literal", "None"}, fe.Command)
}

func TestSyntheticAcceptance(t *testing.T) {
	eval := render(t, "1p1d.yaml", 4, 0)
	perf := render(t, "1p1d.yaml", 4, 3.77)
	for _, i := range []int{1, 2, 3} {
		assert.NotContains(t, env(eval[i]), "SGLANG_SIMULATE_ACC_LEN")
		keys := perf[i].EnvKeys()
		assert.Equal(t, []string{"SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"}, keys[7:10],
			"injected first in the worker block, after srt-slurm's base env")
		assert.Equal(t, "3.77", env(perf[i])["SGLANG_SIMULATE_ACC_LEN"])
		assert.Equal(t, "match-expected", env(perf[i])["SGLANG_SIMULATE_ACC_METHOD"])
		assert.Equal(t, "real-draft-token", env(perf[i])["SGLANG_SIMULATE_ACC_TOKEN_MODE"])
	}
	assert.NotContains(t, env(perf[4]), "SGLANG_SIMULATE_ACC_LEN", "frontends are untouched")
	// A mode without an environment block gets nothing, as InferenceX rewrites blocks.
	two := render(t, "2p1d.yaml", 3, 2.5)
	assert.Equal(t, "2.5", env(two[1])["SGLANG_SIMULATE_ACC_LEN"])
	assert.NotContains(t, env(two[3]), "SGLANG_SIMULATE_ACC_LEN")
}

func TestErrors(t *testing.T) {
	recipe := func(y string) *config.Recipe {
		r, err := config.ParseRecipe("x.yaml", []byte(y), "")
		require.NoError(t, err)
		return r
	}
	base := "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}\n"
	tests := []struct {
		name   string
		recipe *config.Recipe
		nodes  int
		opt    Options
		want   string
	}{
		{"too few nodes", recipe(base + "backend: {type: sglang}\n"), 1, Options{}, "needs 2 nodes, the allocation has 1"},
		{"other backend", recipe(base + "backend: {type: mocker}\n"), 2, Options{}, `engine "mocker" is not supported by the engine launcher yet (sglang, trtllm, vllm)`},
		{"other frontend", recipe(base + "backend: {type: sglang}\nfrontend: {type: trtllm_serve}\n"), 2, Options{}, `frontend.type "trtllm_serve" is not supported`},
		{"vllm frontend on sglang", recipe(base + "backend: {type: sglang}\nfrontend: {type: vllm}\n"), 2, Options{}, "frontend.type: vllm requires the vllm engine"},
		{"custom without command", recipe(base + "backend: {type: sglang}\nbenchmark: {type: custom}\n"), 2, Options{}, "benchmark.command is required"},
		{"AL already set", recipe(base + "backend: {type: sglang, aggregated_environment: {SGLANG_SIMULATE_ACC_LEN: '2'}}\n"), 2,
			Options{SyntheticAL: 3}, "already sets SGLANG_SIMULATE_ACC_LEN"},
		{"negative AL", recipe(base + "backend: {type: sglang}\n"), 2, Options{SyntheticAL: -1}, "must be a positive number"},
		{"unsupported feature", recipe(base + "backend: {type: sglang}\nprofiling: {enabled: true}\n"), 2, Options{}, "profiling.enabled is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opt.Paths.LogDir == "" {
				tt.opt.Paths = PlaceholderPaths("M")
			}
			_, err := Render(tt.recipe, PlaceholderAllocation(tt.recipe, tt.nodes), tt.opt)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n", "one-line errors")
		})
	}
	_, err := config.ParseRecipe("x.yaml", []byte("model: {path: /m, container: i}\nresources: {agg_nodes: 1}\n"), "")
	require.Error(t, err, "a recipe without a name is refused by the loader")
	// srt-slurm's backend section defaults to SGLang.
	procs, err := Render(recipe(base), PlaceholderAllocation(recipe(base), 2), Options{Paths: PlaceholderPaths("M")})
	require.NoError(t, err)
	assert.Equal(t, []string{"python3", "-m", "dynamo.sglang"}, procs.Processes[1].Command[:3], "a recipe without backend runs SGLang")
}

func TestPythonFormatting(t *testing.T) {
	quotes := map[string]string{"": "''", "abc-1.2/x:y,z@%+=_": "abc-1.2/x:y,z@%+=_", "a b": "'a b'", "it's": `'it'"'"'s'`,
		"{LOG_DIR}/x": "{LOG_DIR}/x", "{MODEL_DIR:M-1}": "{MODEL_DIR:M-1}", "{node}": "'{node}'"}
	for in, want := range quotes {
		assert.Equal(t, want, shQuote(in), "%q", in)
	}
}

func TestPlaceholderPathsAndMounts(t *testing.T) {
	procs := render(t, "agg.yaml", 1, 0)
	assert.Equal(t, []string{"{LOG_DIR}", "{MODEL_DIR:Tiny-1B}", "{SRT_ROOT}/configs", "{SRT_ROOT}/src/srtctl/runtime_scripts",
		"{SRT_ROOT}/src/srtctl/benchmarks/scripts", "{INFMAX_WORKSPACE}"}, procs[1].ContainerMounts.Keys)
	assert.Equal(t, "/host-tmp", procs[0].ContainerMounts.Str("/tmp"))
	assert.Equal(t, filepath.Join("{SRT_ROOT}", "src/srtctl/cli/setup_head.py"), procs[0].ContainerMounts.Keys[6])
}
