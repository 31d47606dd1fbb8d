package srtlaunch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

// Expected values follow srt-slurm's backends/vllm.py (v1.0.68) and
// InferenceX's runners/synthetic_injectors/vllm.py.
func TestRenderVLLM(t *testing.T) {
	procs := render(t, "vllm-disagg.yaml", 4, 0)
	assert.Equal(t, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-02_prefill_w0.out", "gb200-03_decode_w0.out",
		"gb200-04_decode_w0.out", "gb200-01_frontend_0.out"}, outputs(procs))
	nixl := `{"kv_connector": "NixlConnector", "kv_role": "kv_both"}`
	assert.Equal(t, []string{"python3", "-m", "dynamo.vllm", "--model", "/model", "--served-model-name", "Tiny-1B",
		"--disaggregation-mode", "prefill", "--kv-transfer-config", nixl, "--device-ids", "0,1,2,3",
		"--master-addr", "10.0.0.1", "--nnodes", "2", "--node-rank", "1", "--headless",
		"--request-plane", "tcp", "--dump-config-to", "{LOG_DIR}/gb200-02_config.json", "--tensor-parallel-size", "8"}, procs[2].Command)
	d := procs[4]
	assert.Equal(t, []string{"python3", "-m", "dynamo.vllm", "--model", "/model", "--served-model-name", "Tiny-1B",
		"--disaggregation-mode", "decode", "--kv-transfer-config", nixl, "--device-ids", "0,1,2,3",
		"--data-parallel-size-local", "4", "--data-parallel-start-rank", "4", "--data-parallel-address", "10.0.0.3",
		"--data-parallel-rpc-port", "8400", "--data-parallel-hybrid-lb", "--request-plane", "tcp",
		"--dump-config-to", "{LOG_DIR}/gb200-04_config.json", "--data-parallel-size", "8",
		"--speculative-config", `{"method":"mtp","num_speculative_tokens":2}`, "--tensor-parallel-size", "1"}, d.Command,
		"a null mode connector falls back to backend.connector")
	// Ports: kv-events blocks of the local DP size, one NIXL block per DP endpoint.
	for i, want := range []map[string]string{
		{"DYN_SYSTEM_PORT": "7500", "DYN_VLLM_KV_EVENT_PORT": "5200", "VLLM_NIXL_SIDE_CHANNEL_PORT": "5400", "VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.1", "VLLM_PORT": "20000"},
		{"DYN_SYSTEM_PORT": "7501", "DYN_VLLM_KV_EVENT_PORT": "5201", "VLLM_NIXL_SIDE_CHANNEL_PORT": "5401", "VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.2", "VLLM_PORT": "20050"},
		{"DYN_SYSTEM_PORT": "7502", "DYN_VLLM_KV_EVENT_PORT": "5202", "VLLM_NIXL_SIDE_CHANNEL_PORT": "5402", "VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.3", "VLLM_PORT": "20100"},
		{"DYN_SYSTEM_PORT": "7503", "DYN_VLLM_KV_EVENT_PORT": "5206", "VLLM_NIXL_SIDE_CHANNEL_PORT": "5402", "VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.4", "VLLM_PORT": "20150"},
	} {
		for k, v := range want {
			assert.Equal(t, v, env(procs[i+1])[k], "%s %s", procs[i+1].Output, k)
		}
		assert.NotContains(t, procs[i+1].EnvKeys(), "CUDA_VISIBLE_DEVICES", "--device-ids instead")
	}
	assert.Equal(t, "VLLM_PORT", d.EnvKeys()[len(d.EnvKeys())-1])
	assert.Contains(t, d.Argv[len(d.Argv)-1], "export VLLM_PORT=20150 && unset -- VLLM_PORT && ", "multi-node workers pick their own base port")

	perf := render(t, "vllm-disagg.yaml", 4, 3.77)
	assert.Contains(t, perf[4].Command, `{"method":"mtp","num_speculative_tokens":2,"rejection_sample_method":"synthetic","synthetic_acceptance_length":3.77}`)
	assert.NotContains(t, perf[4].EnvKeys(), "SGLANG_SIMULATE_ACC_LEN")
}

func TestSyntheticAcceptanceByFramework(t *testing.T) {
	base := "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 1, agg_workers: 1}\n"
	tests := []struct{ name, backend, want string }{
		{"trtllm spec decode", "backend: {type: trtllm, trtllm_config: {aggregated: {speculative_config: {decoding_type: MTP}}}}",
			"InferenceX has no synthetic-acceptance injector for trtllm (backend.trtllm_config.aggregated.speculative_config)"},
		{"vllm without speculative-config", "backend: {type: vllm, vllm_config: {aggregated: {tensor-parallel-size: 4}}}",
			"synthetic acceptance for vllm needs a speculative-config"},
		{"vllm double-quoted json is not rewritten", `backend: {type: vllm, vllm_config: {aggregated: {speculative-config: "{\"n\":1}"}}}`,
			"synthetic acceptance for vllm needs a speculative-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := config.ParseRecipe("x.yaml", []byte(base+tt.backend+"\n"), "")
			require.NoError(t, err)
			_, err = Render(r, PlaceholderAllocation(r, 1), Options{Paths: PlaceholderPaths("M"), SyntheticAL: 3.77})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			_, err = Render(r, PlaceholderAllocation(r, 1), Options{Paths: PlaceholderPaths("M")})
			assert.NoError(t, err, "an eval render is untouched")
		})
	}
	r, err := config.ParseRecipe("x.yaml", []byte(base+"backend: {type: trtllm, trtllm_config: {aggregated: {max_batch_size: 8}}}\n"), "")
	require.NoError(t, err)
	_, err = Render(r, PlaceholderAllocation(r, 1), Options{Paths: PlaceholderPaths("M"), SyntheticAL: 3.77})
	assert.NoError(t, err, "no draft model: nothing to pin")
}
