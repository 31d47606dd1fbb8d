package resultfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

func TestReadFixtureAndPerf(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "disagg_1p1d_conc64.json"))
	require.NoError(t, err)
	require.NotNil(t, r.Multinode)
	assert.Nil(t, r.SingleNode)
	assert.Equal(t, 64, r.Conc)
	assert.Equal(t, 24, r.NumGPUs())
	assert.Equal(t, map[string]any{"name": "fixture-traces"}, r.Dataset)
	require.NoError(t, r.Gate())

	p := r.Perf()
	tests := []struct {
		name      string
		got, want float64
	}{
		{"tput per gpu = total / all 24 GPUs", p.TputPerGPU, 97200.0 / 24},
		{"output per gpu = output / 16 decode GPUs", p.OutputTputPerGPU, 1200.0 / 16},
		{"input per gpu = input / 8 prefill GPUs", p.InputTputPerGPU, 96000.0 / 8},
		{"interactivity = intvty p50 tok/s/user", p.Interactivity, 50},
		{"ttft p90 s -> ms", p.TTFTp90Ms, 2500},
		{"tpot p50 s -> ms", p.TPOTMedianMs, 20},
		{"e2el p50 s -> ms", p.E2ELMedianMs, 18000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.InDelta(t, tc.want, tc.got, 1e-9) })
	}
	assert.Equal(t, 1000, p.Requests)
	assert.Equal(t, 10, p.Failed)
	assert.False(t, p.Simulated)

	// The validity gate's evidence: 990 successful calls of 800 output
	// tokens on average over the file's 600 s window; 64 lanes planned over
	// DURATION 600 less two 10 s idle-gap caps.
	ev := r.Evidence()
	assert.Equal(t, point.PerfEvidence{Client: point.PerfClientBenchmark, Completed: 990, OutputTokens: 990 * 800, WindowSec: 600,
		MeanPromptTokens: ev.MeanPromptTokens, MeanOutputTokens: 800, ITLMedianMs: 20, LanesFinished: -1}, ev)
	p.Evidence = &ev
	require.NoError(t, point.ValidatePerf(p, point.PerfPlan{Scenario: ScenarioAgentic, Lanes: 64, WindowSec: 580, ClockScale: 1}))
	assert.Equal(t, []string{"client_lag: benchmark does not measure it"}, ev.Waived)
}

func TestWriteReadRoundTrip(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "disagg_1p1d_conc64.json"))
	require.NoError(t, err)
	r.Simulated = true
	path := filepath.Join(t.TempDir(), "sub", FileName("dsv4_fp4_x", 64))
	require.NoError(t, Write(path, r))
	assert.Equal(t, "dsv4_fp4_x_conc64.json", filepath.Base(path))
	back, err := Read(path)
	require.NoError(t, err)
	back.Extra = nil
	r.Extra = nil
	assert.Equal(t, r, back)
	assert.True(t, back.Perf().Simulated)
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body, want string
	}{
		{"syntax error names the line", "{\n\"conc\": 1,\n\"x\": }", "line 3: invalid JSON"},
		{"missing field named", `{"conc": 1, "num_requests_total": 1, "num_requests_successful": 1}`, "field request_metrics: missing"},
		{"wrong type named", "{\"conc\": \"64\", \"num_requests_total\": 1,\n\"num_requests_successful\": 1, \"request_metrics\": {}}", "field conc: expected int"},
		{"successful above total", `{"conc": 1, "num_requests_total": 1, "num_requests_successful": 2, "request_metrics": {}}`, "exceeds num_requests_total"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.json")
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o644))
			_, err := Read(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), p)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestGate(t *testing.T) {
	tests := []struct {
		name      string
		ok, errs  int
		wantError bool
	}{
		{"healthy", 100, 5, false},
		{"nothing succeeded", 0, 0, true},
		{"too many errors", 80, 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{NumRequestsSuccess: tc.ok, RequestAccounting: RequestAccounting{RecordsErrorDropped: tc.errs}}
			if tc.wantError {
				assert.Error(t, r.Gate())
			} else {
				assert.NoError(t, r.Gate())
			}
		})
	}
}

func TestIdentityShapes(t *testing.T) {
	base := map[string]string{
		"CONC": "64", "MODEL": "m", "MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4",
		"KV_OFFLOADING": "none", "IS_MULTINODE": "true",
	}
	env := func(extra map[string]string) Env {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}
	tests := []struct {
		name               string
		extra              map[string]string
		gpus, tp, ep       int
		prefGPU, decGPU    int
		dpa, wantErrSubstr string
	}{
		{"2P1D DEP16/DEP32", map[string]string{"PREFILL_NUM_WORKERS": "2", "PREFILL_TP": "16", "PREFILL_EP": "16", "PREFILL_DP_ATTN": "true",
			"DECODE_NUM_WORKERS": "1", "DECODE_TP": "32", "DECODE_EP": "32", "DECODE_DP_ATTN": "true"}, 64, 48, 32, 32, 32, "true", ""},
		{"TP8 agg (decode workers 0)", map[string]string{"PREFILL_NUM_WORKERS": "1", "PREFILL_TP": "8", "DECODE_NUM_WORKERS": "0", "DECODE_TP": "8"},
			8, 8, 1, 8, 0, "false", ""},
		{"offload without backend refused", map[string]string{"KV_OFFLOADING": "dram"}, 0, 0, 0, 0, 0, "", "KV_OFFLOAD_BACKEND is required"},
		{"bad integer named", map[string]string{"PREFILL_TP": "eight"}, 0, 0, 0, 0, 0, "", `PREFILL_TP="eight"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Identity(env(tc.extra))
			if tc.wantErrSubstr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErrSubstr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.gpus, r.NumGPUs())
			assert.Equal(t, tc.tp, r.TP)
			assert.Equal(t, tc.ep, r.EP)
			assert.Equal(t, tc.prefGPU, r.Multinode.NumPrefillGPU)
			assert.Equal(t, tc.decGPU, r.Multinode.NumDecodeGPU)
			assert.Equal(t, tc.dpa, r.DPAttention)
			assert.Equal(t, ScenarioAgentic, r.ScenarioType)
		})
	}
}
