package activities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
)

func TestBenchmarkEnv(t *testing.T) {
	p := point.Spec{PointID: "dsv4_x", Conc: 64, DurationSec: 3600, Model: "deepseek-ai/DeepSeek-V4-Pro-0813", ModelPrefix: "dsv4",
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

	_, err = benchmarkEnv(point.Spec{PointID: "bad", Row: []byte(`{`)}, "x")
	require.ErrorContains(t, err, "point bad: matrix row")
}

// The seed sweep's benchmark environment is complete for the benchmark
// (agentic_srt.sh's check_env_vars, benchmark_lib's KV offload rules, the
// multinode GPU shape process_agentic_result.py reads).
func TestBenchmarkEnvSeedSweep(t *testing.T) {
	sw, err := config.LoadSweep("../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	cl, err := config.LoadCluster("../configs/clusters/slurm-emu.yaml")
	require.NoError(t, err)
	pl, err := plan.Build(plan.Options{Sweep: sw, Cluster: cl})
	require.NoError(t, err)
	require.Len(t, pl.Points, 8)
	for _, pt := range pl.Points {
		p := point.Spec{PointID: pt.ExpName, Conc: pt.Conc, Model: pt.Model, ModelPrefix: pt.ModelPrefix, Row: pt.Row,
			DurationSec: pt.DurationSec, ISL: pt.ISL, OSL: pt.OSL}
		env, err := benchmarkEnv(p, pt.ExpName)
		require.NoError(t, err)
		for _, k := range []string{"MODEL", "MODEL_PREFIX", "FRAMEWORK", "PRECISION", "CONC", "RESULT_FILENAME", "DURATION"} {
			assert.NotEmpty(t, env[k], "%s: %s", pt.ExpName, k)
		}
		assert.Equal(t, "dram", env["KV_OFFLOADING"], pt.ExpName)
		assert.Equal(t, "hicache", env["KV_OFFLOAD_BACKEND"], pt.ExpName)
		assert.JSONEq(t, `{"name":"hicache"}`, env["KV_OFFLOAD_BACKEND_METADATA"], pt.ExpName)
		assert.Contains(t, env["ROUTER_METADATA"], `"name":"dynamo-router"`, pt.ExpName)
		assert.Equal(t, pt.RecipePath, "recipes/"+strings.TrimPrefix(env["CONFIG_FILE"], "recipes/"), "additional-settings exported")
		assert.Equal(t, "3.77", env["SYNTHETIC_ACCEPTANCE_LENGTH"], pt.ExpName)
		res, err := resultfile.Identity(func(k string) string { return env[k] })
		require.NoError(t, err, pt.ExpName)
		require.NotNil(t, res.Multinode, pt.ExpName)
		assert.Equal(t, pt.PrefillGPUs+pt.DecodeGPUs, res.NumGPUs(), "%s: the GPU shape", pt.ExpName)
		assert.Equal(t, pt.Conc, res.Conc)
	}
}

func TestReadBenchmarkResult(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, resultfile.FileName("dsv4_x", 64))
	env := map[string]string{"MODEL": "m", "MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4", "CONC": "64",
		"KV_OFFLOADING": "none", "IS_MULTINODE": "true", "PREFILL_NUM_WORKERS": "1", "PREFILL_TP": "8",
		"DECODE_NUM_WORKERS": "1", "DECODE_TP": "16"}
	r, err := resultfile.Identity(func(k string) string { return env[k] })
	require.NoError(t, err)
	r.NumRequestsTotal, r.NumRequestsSuccess = 108, 98
	r.RequestAccounting = resultfile.RequestAccounting{RecordsTotal: 108, RecordsProfiled: 98, RecordsWarmupDropped: 8, RecordsErrorDropped: 2}
	r.RequestMetrics.Latency.TTFT.P90 = 1.5
	r.RequestMetrics.Latency.TPOT.P50 = 0.02
	r.RequestMetrics.Latency.E2EL.P50 = 30
	r.RequestMetrics.Latency.Intvty.P50 = 50
	r.RequestMetrics.Throughput.Total.TokensPerSecond = 24 * 900
	r.RequestMetrics.Throughput.Output.TokensPerSecond = 16 * 120
	r.RequestMetrics.Throughput.Input.TokensPerSecond = 8 * 2400
	r.RequestMetrics.Throughput.DurationSeconds = 600
	r.RequestMetrics.Tokens.Input.Mean = 31000
	r.RequestMetrics.Tokens.OutputActual.Mean = 250.5
	r.RequestMetrics.Latency.ITL.P50 = 0.021
	require.NoError(t, resultfile.Write(path, r))
	got, gate, err := readBenchmarkResult(path)
	require.NoError(t, err)
	require.NoError(t, gate)
	// The evidence the validity gate judges: aiperf gives no output total
	// (mean x successes: 250.5 x 98), no lanes and no client lag.
	assert.Equal(t, point.PerfSummary{OutputTputPerGPU: 120, TputPerGPU: 900, InputTputPerGPU: 2400, Interactivity: 50,
		TTFTp90Ms: 1500, TPOTMedianMs: 20, E2ELMedianMs: 30000, Requests: 100, Failed: 2,
		Evidence: &point.PerfEvidence{Client: point.PerfClientBenchmark, Completed: 98, OutputTokens: 24549, WindowSec: 600,
			MeanPromptTokens: 31000, MeanOutputTokens: 250.5, ITLMedianMs: 21, LanesFinished: -1}}, got)

	r.NumRequestsSuccess = 0
	require.NoError(t, resultfile.Write(path, r))
	_, gate, err = readBenchmarkResult(path)
	require.NoError(t, err)
	require.ErrorContains(t, gate, "num_requests_successful is 0", "the gate fails, which a retry may pass")

	require.NoError(t, os.WriteFile(path, []byte("{\n  \"conc\": \"x\"\n}"), 0o644))
	_, _, err = readBenchmarkResult(path)
	require.ErrorContains(t, err, path)
}

// On a simulated engine the worker's perf cap (wall time on the scaled
// clock) becomes the benchmark's DURATION in model seconds; real engines
// always run the row's duration.
func TestSimulatedDuration(t *testing.T) {
	p := point.Spec{DurationSec: 3600}
	for _, tc := range []struct {
		name string
		a    Activities
		want int
	}{
		{"simulated, capped", Activities{Simulated: true, Load: PerfConfig{Duration: 4 * time.Second, TimeScale: 0.002}}, 2000},
		{"simulated, cap longer than the row", Activities{Simulated: true, Load: PerfConfig{Duration: 20 * time.Second, TimeScale: 0.002}}, 0},
		{"simulated, no cap", Activities{Simulated: true, Load: PerfConfig{TimeScale: 0.002}}, 0},
		{"real engine", Activities{Load: PerfConfig{Duration: 4 * time.Second, TimeScale: 1}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.a.simulatedDuration(p)) })
	}
}
