package srtlaunch

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

// Expected values follow srt-slurm's backends/trtllm.py and
// cli/mixins/worker_stage.py (start_endpoint_worker) at v1.0.68.
func TestRenderTRTLLM(t *testing.T) {
	rec := load(t, "trtllm-disagg.yaml")
	r, err := Render(rec, PlaceholderAllocation(rec, 3), Options{Paths: PlaceholderPaths("Tiny-1B"), JobID: "7"})
	require.NoError(t, err)
	procs := r.Processes
	assert.Equal(t, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-02_decode_w0.out", "gb200-01_nginx.out",
		"gb200-02_frontend_0.out", "gb200-03_frontend_1.out", "benchmark.out"}, outputs(procs))

	p, d := procs[1], procs[2]
	assert.Equal(t, []string{"numactl", "-m", "0,1", "trtllm-llmapi-launch", "python3", "-m", "dynamo.trtllm", "--model-path", "/model",
		"--served-model-name", "Tiny-1B", "--disaggregation-mode", "prefill", "--extra-engine-args", "/logs/trtllm_config_prefill.yaml",
		"--request-plane", "nats", "--publish-events-and-metrics"}, p.Command)
	assert.Equal(t, []string{"gb200-02", "gb200-03"}, d.Nodelist, "one srun spans the decode worker's nodes")
	assert.Equal(t, "Tiny-1B", r.ServedModel, "TensorRT-LLM serves the checkpoint directory's name; clients must ask for it")
	assert.Equal(t, []string{"HEAD_NODE_IP", "ETCD_ENDPOINTS", "NATS_SERVER", "DYN_SYSTEM_PORT", "DYN_SKIP_SGLANG_LOG_FORMATTING", "DYN_LOG",
		"P", "TRTLLM_EPLB_SHM_NAME", "GLOBAL", "CUDA_VISIBLE_DEVICES"}, p.EnvKeys(), "no DYN_REQUEST_PLANE on the MPI path")
	assert.Equal(t, "{node}", env(p)["P"], "no {node} templating on the MPI path")
	assert.Equal(t, "0,1", env(p)["CUDA_VISIBLE_DEVICES"])
	assert.Equal(t, "7501", env(d)["DYN_SYSTEM_PORT"])
	assert.NotContains(t, d.EnvKeys(), "CUDA_VISIBLE_DEVICES")
	shm := regexp.MustCompile(`^moe_shared_[0-9a-f]{32}$`)
	assert.Regexp(t, shm, env(p)["TRTLLM_EPLB_SHM_NAME"])
	assert.NotEqual(t, env(p)["TRTLLM_EPLB_SHM_NAME"], env(d)["TRTLLM_EPLB_SHM_NAME"], "unique per worker")
	again, err := Render(rec, PlaceholderAllocation(rec, 3), Options{Paths: PlaceholderPaths("Tiny-1B"), JobID: "7"})
	require.NoError(t, err)
	assert.Equal(t, env(d)["TRTLLM_EPLB_SHM_NAME"], env(again.Processes[2])["TRTLLM_EPLB_SHM_NAME"], "deterministic")

	// srun: PMIx, one task per GPU over the nodes, no recipe srun_options.
	argv := strings.Join(d.Argv[:len(d.Argv)-1], " ")
	assert.Contains(t, argv, "--overlap --mpi pmix --oversubscribe --cpu-bind=verbose,none --nodes 2 --ntasks 8 --nodelist gb200-02,gb200-03 ")
	assert.Contains(t, strings.Join(p.Argv, " "), "--nodes 1 --ntasks 2 ")
	assert.Zero(t, d.SrunOptions.Len())
	assert.Equal(t, []string{"mem"}, procs[6].SrunOptions.Keys, "the benchmark keeps them")
	assert.Equal(t, "Tiny-1B", procs[6].Command[8])

	assert.Equal(t, `cuda_graph_config: null
kv_cache_config:
  dtype: fp8
  enable_block_reuse: false
  free_gpu_memory_fraction: 0.5
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 3
tensor_parallel_size: 2
`, r.Files["trtllm_config_prefill.yaml"])
	assert.Equal(t, `cuda_graph_config:
  batch_sizes:
  - 1
  - 2
  - 4
  enable_padding: true
moe_config: {}
note: 'yes'
tensor_parallel_size: 8
tiny: 1.0e-05
`, r.Files["trtllm_config_decode.yaml"])
	assert.NotContains(t, r.Files, "trtllm_config_agg.yaml")
	assert.Contains(t, r.Files["nginx.conf"], "server 10.0.0.2:8180;")
}

func TestPyYAMLDump(t *testing.T) {
	// The values as a recipe holds them: a role's engine args.
	r, err := config.ParseRecipe("r.yaml", []byte("name: x\nmodel: {path: /m, container: c}\nresources: {gpus_per_node: 4, agg_nodes: 1}\n"+
		"backend:\n  type: trtllm\n  trtllm_config:\n    aggregated: {b: [{y: 1, x: [a, b]}, [1, [2]], []], a: {}, c: 'true', d: '- x', e: 'a: b', f: 1.5, g: ''}\n"), "")
	require.NoError(t, err)
	v := r.Roles.Agg.Args
	assert.Equal(t, `a: {}
b:
- x:
  - a
  - b
  y: 1
- - 1
  - - 2
- []
c: 'true'
d: '- x'
e: 'a: b'
f: 1.5
g: ''
`, pyYAMLDump(v))
	assert.Equal(t, "{}\n", pyYAMLDump(config.NewMap()))
}
