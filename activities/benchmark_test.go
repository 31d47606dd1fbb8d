package activities

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBenchmarkEnv(t *testing.T) {
	p := PointSpec{PointID: "dsv4_x", Conc: 64, DurationSec: 3600, Model: "deepseek-ai/DeepSeek-V4-Pro-0813", ModelPrefix: "dsv4",
		Row: []byte(`{"image":"lmsysorg/sglang:x","model-prefix":"dsv4","precision":"fp4","framework":"dynamo-sglang",
		"spec-decoding":"dspark","disagg":true,"conc":[64],"duration":3600,"kv-offloading":"dram","total-cpu-dram-gb":721,
		"prefill":{"num-worker":1,"tp":8,"ep":8,"dp-attn":true,"pp":1},"decode":{"num-worker":1,"tp":16},"router":{"name":"r"}}`)}
	env, err := benchmarkEnv(p, "dsv4_x")
	require.NoError(t, err)
	for k, v := range map[string]string{
		"CONC": "64", "DURATION": "3600", "MODEL": p.Model, "MODEL_PREFIX": "dsv4", "PRECISION": "fp4", "FRAMEWORK": "dynamo-sglang",
		"RESULT_FILENAME": "dsv4_x", "IS_MULTINODE": "true", "IS_AGENTIC": "1", "SPEC_DECODING": "dspark", "DISAGG": "true",
		"KV_OFFLOADING": "dram", "TOTAL_CPU_DRAM_GB": "721", "IMAGE": "lmsysorg/sglang:x",
		"PREFILL_NUM_WORKERS": "1", "PREFILL_TP": "8", "PREFILL_EP": "8", "PREFILL_DP_ATTN": "true", "PREFILL_PP_SIZE": "1", "DECODE_TP": "16",
	} {
		assert.Equal(t, v, env[k], k)
	}
	assert.NotContains(t, env, "ROUTER", "nested non-worker objects are not flattened")

	_, err = benchmarkEnv(PointSpec{PointID: "bad", Row: []byte(`{`)}, "x")
	require.ErrorContains(t, err, "point bad: matrix row")
}

func TestReadBenchmarkResult(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dsv4_x_conc64.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"conc":64,"num_requests_total":100,"num_requests_successful":98,
	 "request_metrics":{"latency":{"ttft":{"p90":1.5},"tpot":{"p50":0.02},"e2el":{"p50":30},"intvty":{"p50":50}},
	 "throughput":{"per_gpu":{"total_tput_tps":900,"output_tput_tps":120,"input_tput_tps":2400}}}}`), 0o644))
	got, err := readBenchmarkResult(path)
	require.NoError(t, err)
	assert.Equal(t, PerfSummary{OutputTputPerGPU: 120, TputPerGPU: 900, InputTputPerGPU: 2400, Interactivity: 50,
		TTFTp90Ms: 1500, TPOTMedianMs: 20, E2ELMedianMs: 30000, Requests: 100, Failed: 2}, got)

	require.NoError(t, os.WriteFile(path, []byte(`{"num_requests_total":5,"num_requests_successful":0}`), 0o644))
	_, err = readBenchmarkResult(path)
	require.ErrorContains(t, err, "num_requests_successful is 0")
}
