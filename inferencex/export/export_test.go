package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// The rows a 2P1D DEP16/DEP32 agentic point and a TP8 aggregate point of the
// seed sweep carry, as the planner writes them into the point spec.
const (
	disaggRow = `{"image":"lmsysorg/sglang:nightly-dev-20260916-c9a8fba9","model":"deepseek-ai/DeepSeek-V4-Pro-0813","model-prefix":"dsv4",
	"precision":"fp4","framework":"dynamo-sglang","runner":"cluster:gb200-nv","spec-decoding":"mtp",
	"prefill":{"num-worker":2,"tp":16,"ep":16,"dp-attn":true,"pp":1,"dcp-size":1,"pcp-size":1},
	"decode":{"num-worker":1,"tp":32,"ep":32,"dp-attn":true,"pp":1,"dcp-size":1,"pcp-size":1},
	"conc":[768],"kv-offloading":"dram","total-cpu-dram-gb":721,"duration":3600,
	"exp-name":"dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache","disagg":true,"scenario-type":"agentic-coding",
	"kv-offload-backend":{"name":"hicache"},"router":{"name":"dynamo-router","version":"1.5.0.dev20260910"}}`
	fixedRow = `{"image":"img:1","model":"deepseek-ai/DeepSeek-R1","model-prefix":"dsr1","precision":"fp8","framework":"dynamo-trt",
	"runner":"gb200","spec-decoding":"none",
	"prefill":{"num-worker":1,"tp":4,"ep":4,"dp-attn":false,"pp":1,"dcp-size":1,"pcp-size":1,"hardware":"gb200"},
	"decode":{"num-worker":0,"tp":8,"ep":8,"dp-attn":true,"pp":1,"dcp-size":1,"pcp-size":1},
	"conc":[64,128],"isl":1024,"osl":1024,"exp-name":"dsr1_1k1k","disagg":false,"kv-p2p-transfer":"nixl"}`
)

func spec(pointID, configKey string, conc, gpus, prefill, decode int, row string) []byte {
	b, _ := json.Marshal(map[string]any{"point_id": pointID, "config_key": configKey, "conc": conc, "gpus": gpus,
		"prefill_gpus": prefill, "decode_gpus": decode, "fingerprint": "fp-" + pointID, "row": json.RawMessage(row)})
	return b
}

type fixture struct {
	store *results.Store
	arts  *artifacts.DirStore
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := results.Open(context.Background(), filepath.Join(dir, "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	a, err := artifacts.NewDirStore(filepath.Join(dir, "artifacts"))
	require.NoError(t, err)
	return fixture{store: s, arts: a}
}

func (f fixture) put(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	uri, err := f.arts.Put(context.Background(), name, bytes.NewReader(b))
	require.NoError(t, err)
	return uri
}

// fill writes sweep "sw": an agentic disagg point with its aggregate and an
// eval, a fixed-seq point at two concs, a legacy point recorded without a
// spec, and a perf result whose aggregate artifact is gone.
func fill(t *testing.T, f fixture) {
	ctx := context.Background()
	require.NoError(t, f.store.UpsertSweep(ctx, results.Sweep{ID: "sw", Name: "seed", Status: "completed"}))
	pts := []results.Point{
		{SweepID: "sw", PointID: "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache", Identity: "fpA", ConfigKey: "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg",
			ExpName: "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache", Topology: "2P1D DEP16/DEP32", Conc: 768, Status: "completed",
			SpecJSON: spec("dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache", "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg", 768, 64, 32, 32, disaggRow)},
		{SweepID: "sw", PointID: "dsr1_1k1k-c64", Identity: "fpB", ConfigKey: "dsr1-fp8-gb200-dynamo-trt", ExpName: "dsr1_1k1k", Topology: "TP4 agg", Conc: 64, Status: "completed",
			SpecJSON: spec("dsr1_1k1k-c64", "dsr1-fp8-gb200-dynamo-trt", 64, 4, 4, 0, fixedRow)},
		{SweepID: "sw", PointID: "dsv4_p1x8_d0x8_conc4_kvdram-hicache", Identity: "fpC", ConfigKey: "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg",
			ExpName: "dsv4_p1x8_d0x8_conc4_kvdram-hicache", Topology: "TP8 agg", Conc: 4, Status: "completed"},
	}
	for _, p := range pts {
		require.NoError(t, f.store.UpsertPoint(ctx, p))
	}
	agentic := map[string]any{"scenario_type": "agentic-coding", "simulated": true, "model": "deepseek-ai/DeepSeek-V4-Pro-0813", "conc": 768,
		"num_requests_total": 18432, "num_requests_successful": 18400, "failed": 32, "num_warmups": 0, "error_categories": map[string]int{"timeout": 32},
		"num_prefill_gpu": 32, "num_decode_gpu": 32, "seed": 1, "num_prompts": 18432, "duration_limit": 18,
		"request_metrics": map[string]any{"latency": map[string]any{"ttft": map[string]float64{"p90": 1.56}, "intvty": map[string]float64{"p50": 61.5}},
			"throughput": map[string]any{"per_gpu": map[string]float64{"output_tput_tps": 2979.4}}}}
	perfSummary := func(uri string) []byte {
		b, _ := json.Marshal(map[string]any{"aggregate_uri": uri, "simulated": true})
		return b
	}
	aggURI := f.put(t, "agentic_conc768.json", agentic)
	require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pts[0].PointID, Identity: "fpA", ConfigKey: pts[0].ConfigKey, ExpName: pts[0].ExpName, Conc: 768, JSON: perfSummary(aggURI), PerfSummary: point.PerfSummary{OutputTputPerGPU: 5958.8, TputPerGPU: 56085.5, InputTputPerGPU: 106212.2, Interactivity: 61.5, TTFTp90Ms: 1563.6, Simulated: true}}))

	fixed := map[string]any{"max_concurrency": 64, "total_token_throughput": 40000.0, "output_throughput": 20000.0, "request_throughput": 10.0,
		"mean_ttft": 0.21, "median_ttft": 0.2, "p90_ttft": 0.3, "p99.9_ttft": 0.5, "median_tpot": 0.02, "median_intvty": 50.0,
		"p99_e2el": 25.0, "num_prefill_gpu": 4, "num_decode_gpu": 0, "model": "deepseek-ai/DeepSeek-R1", "request_rate": "inf"}
	fixedURI := f.put(t, "dsr1_conc64.json", fixed)
	require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pts[1].PointID, Identity: "fpB", ConfigKey: pts[1].ConfigKey, ExpName: "dsr1_1k1k", Conc: 64, JSON: perfSummary(fixedURI), PerfSummary: point.PerfSummary{OutputTputPerGPU: 5000, TputPerGPU: 10000, InputTputPerGPU: 5000, Interactivity: 50, TTFTp90Ms: 300}}))

	// Legacy point: no spec, and its aggregate artifact was never stored.
	missing := "file://" + filepath.Join(f.arts.Root(), "sha256", "00", fmt.Sprintf("%064d", 0), "x.json")
	require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pts[2].PointID, Identity: "fpC", ConfigKey: pts[2].ConfigKey, ExpName: pts[2].ExpName, Conc: 4, JSON: perfSummary(missing), PerfSummary: point.PerfSummary{OutputTputPerGPU: 4789.1, TputPerGPU: 91046.8, Interactivity: 64.2, TTFTp90Ms: 10.6, TPOTMedianMs: 15.5, Simulated: true}}))

	evalRec := map[string]any{"task": "gsm8k", "mode": "lm-eval", "em_strict": 0.953, "em_strict_se": 0.0058, "em_flexible": 0.955, "em_flexible_se": 0.0057,
		"n_eff": 1319, "score": 0.953, "score_name": "em_strict", "score_se": 0.0058, "simulated": true, "model_prefix": "dsv4", "conc": 768,
		"gate": map[string]any{"passed": true, "floor": 0.91}}
	evalURI := f.put(t, "eval_dsv4.json", evalRec)
	evalSum, _ := json.Marshal(map[string]any{"result_uri": evalURI})
	require.NoError(t, f.store.PutEval(ctx, results.EvalResult{SweepID: "sw", PointID: pts[0].PointID, Identity: "fpA", EMStrict: 0.953, EMFlexible: 0.955,
		NEff: 1319, Passed: true, Floor: 0.91, Simulated: true, JSON: evalSum}))
}

func TestBuildRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fill(t, f)
	e, err := Build(context.Background(), f.store, f.arts, "sw")
	require.NoError(t, err)
	require.Len(t, e.Bmk, 3)
	require.Len(t, e.Evals, 1)
	bmk := map[string]map[string]any{}
	for _, r := range e.Bmk {
		bmk[r["point_id"].(string)] = r
	}
	disagg := bmk["dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache"]
	fixed := bmk["dsr1_1k1k-c64"]
	legacy := bmk["dsv4_p1x8_d0x8_conc4_kvdram-hicache"]
	require.NotNil(t, disagg)
	require.NotNil(t, fixed)
	require.NotNil(t, legacy)

	num := func(v any) any {
		if n, ok := v.(json.Number); ok {
			f, _ := n.Float64()
			return f
		}
		return v
	}
	tests := []struct {
		name  string
		row   map[string]any
		field string
		want  any
	}{
		// Identity of an agentic multinode point (process_agentic_result.py).
		{"agentic hw is the runner label", disagg, "hw", "cluster:gb200-nv"},
		{"agentic conc", disagg, "conc", 768},
		{"agentic image", disagg, "image", "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9"},
		{"agentic model prefix", disagg, "infmax_model_prefix", "dsv4"},
		{"agentic framework", disagg, "framework", "dynamo-sglang"},
		{"agentic precision", disagg, "precision", "fp4"},
		{"agentic spec decoding", disagg, "spec_decoding", "mtp"},
		{"agentic disagg", disagg, "disagg", true},
		{"agentic scenario", disagg, "scenario_type", "agentic-coding"},
		{"agentic multinode", disagg, "is_multinode", true},
		{"agentic tp is prefill+decode", disagg, "tp", 48},
		{"agentic ep is the max", disagg, "ep", 32},
		{"agentic dp attention", disagg, "dp_attention", true},
		{"agentic prefill workers", disagg, "prefill_num_workers", 2},
		{"agentic decode tp", disagg, "decode_tp", 32},
		{"agentic gpus from the load generator", disagg, "num_prefill_gpu", 32},
		{"agentic kv offloading", disagg, "kv_offloading", "dram"},
		{"agentic kv backend", disagg, "kv_offload_backend", map[string]any{"name": "hicache"}},
		{"agentic cpu dram", disagg, "allocated_cpu_dram_gb", 721},
		{"agentic router", disagg, "router", map[string]any{"name": "dynamo-router", "version": "1.5.0.dev20260910"}},
		{"agentic exp name", disagg, "exp_name", "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache"},
		{"agentic simulated", disagg, "simulated", true},
		{"agentic requests", disagg, "num_requests_total", 18432},
		{"agentic successful", disagg, "num_requests_successful", 18400},
		{"agentic error drops", disagg, "request_accounting", map[string]any{"records_total": 18432, "records_profiled": 18400,
			"records_dropped_total": 32, "records_warmup_dropped": 0, "records_error_dropped": 32, "error_categories": map[string]any{"timeout": json.Number("32")}}},
		{"agentic headline output tput/GPU", disagg, "output_tput_per_gpu", 5958.8},
		// Fixed-seq-len multinode point (process_result.py).
		{"fixed hw", fixed, "hw", "gb200"},
		{"fixed isl", fixed, "isl", 1024},
		{"fixed osl", fixed, "osl", 1024},
		{"fixed not agentic", fixed, "scenario_type", nil},
		{"fixed decode zeroed without decode workers", fixed, "decode_tp", 0},
		{"fixed decode dp zeroed", fixed, "decode_dp_attention", false},
		{"fixed prefill hw", fixed, "prefill_hw", "gb200"},
		{"fixed kv p2p", fixed, "kv_p2p_transfer", "nixl"},
		{"fixed output tput/GPU", fixed, "output_tput_per_gpu", 5000.0},
		{"fixed latency in seconds without _ms", fixed, "p90_ttft", 0.3},
		{"fixed p99.9 kept", fixed, "p99.9_ttft", 0.5},
		{"fixed interactivity", fixed, "median_intvty", 50.0},
		{"fixed throughput", fixed, "total_token_throughput", 40000.0},
		{"fixed model id", fixed, "model_id", "deepseek-ai/DeepSeek-R1"},
		{"fixed not simulated", fixed, "simulated", nil},
		{"fixed recipe fingerprint", fixed, "recipe_fingerprint", recipeFingerprint(json.RawMessage(fixedRow))},
		// Legacy point: identity from the exp-name, figures from the ledger.
		{"legacy prefix from exp-name", legacy, "infmax_model_prefix", "dsv4"},
		{"legacy prefill tp", legacy, "prefill_tp", 8},
		{"legacy decode zeroed", legacy, "decode_num_workers", 0},
		{"legacy not disagg", legacy, "disagg", false},
		{"legacy hw unknown", legacy, "hw", nil},
		{"legacy ttft from the ledger in s", legacy, "request_metrics", map[string]any{
			"latency": map[string]any{"ttft": map[string]any{"p90": 0.0106}, "tpot": map[string]any{"p50": 0.0155},
				"e2el": map[string]any{"p50": 0.0}, "intvty": map[string]any{"p50": 64.2}},
			"throughput": map[string]any{"per_gpu": map[string]any{"output_tput_tps": 4789.1, "total_tput_tps": 91046.8, "input_tput_tps": 0.0}}}},
		{"legacy simulated", legacy, "simulated", true},
		// agg_eval_all row (collect_eval_results.py).
		{"eval task", e.Evals[0], "task", "gsm8k"},
		{"eval em strict", e.Evals[0], "em_strict", 0.953},
		{"eval em flexible se", e.Evals[0], "em_flexible_se", 0.0057},
		{"eval n_eff", e.Evals[0], "n_eff", 1319.0},
		{"eval score name", e.Evals[0], "score_name", "em_strict"},
		{"eval hw from identity", e.Evals[0], "hw", "cluster:gb200-nv"},
		{"eval precision from identity", e.Evals[0], "precision", "fp4"},
		{"eval prefill ep", e.Evals[0], "prefill_ep", 16},
		{"eval conc", e.Evals[0], "conc", 768},
		{"eval floor", e.Evals[0], "floor", 0.91},
		{"eval simulated", e.Evals[0], "simulated", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.row[tc.field]
			if tc.want == nil {
				assert.False(t, ok, "%s should be absent, got %v", tc.field, got)
				return
			}
			require.True(t, ok, "%s missing", tc.field)
			if f, isF := tc.want.(float64); isF {
				assert.InDelta(t, f, num(got), 1e-9)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Len(t, e.Warnings, 2, "%q", e.Warnings)
	assert.Contains(t, e.Warnings[0]+e.Warnings[1], "identity from its exp-name only")
	assert.Contains(t, e.Warnings[0]+e.Warnings[1], "artifact not found")
}

func TestWriteDirAndStableOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fill(t, f)
	ctx := context.Background()
	var outs [2][]byte
	for i := range outs {
		e, err := Build(ctx, f.store, f.arts, "sw")
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "out")
		paths, err := e.WriteDir(dir)
		require.NoError(t, err)
		require.Equal(t, []string{filepath.Join(dir, BmkFile), filepath.Join(dir, EvalFile)}, paths)
		outs[i], err = os.ReadFile(paths[0])
		require.NoError(t, err)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal(outs[i], &rows))
		require.Len(t, rows, 3)
		assert.Equal(t, "dsr1-fp8-gb200-dynamo-trt", rows[0]["config_key"], "sorted by config key, then conc")
		var evals []map[string]any
		data, err := os.ReadFile(paths[1])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &evals))
		assert.Len(t, evals, 1)
	}
	assert.Equal(t, outs[0], outs[1], "two exports of one sweep are identical")
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fill(t, f)
	tests := []struct {
		name  string
		sweep string
		arts  artifacts.Store
		check func(t *testing.T, e *Export, err error)
	}{
		{name: "unknown sweep", sweep: "nope", arts: f.arts, check: func(t *testing.T, e *Export, err error) {
			require.ErrorIs(t, err, ErrNoSweep)
			assert.ErrorContains(t, err, `"nope"`)
		}},
		{name: "no artifact store: ledger figures and a warning per point", sweep: "sw", arts: nil, check: func(t *testing.T, e *Export, err error) {
			require.NoError(t, err)
			require.Len(t, e.Bmk, 3)
			assert.GreaterOrEqual(t, len(e.Warnings), 4)
			for _, r := range e.Bmk {
				assert.NotNil(t, r["output_tput_per_gpu"])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Build(context.Background(), f.store, tc.arts, tc.sweep)
			tc.check(t, e, err)
		})
	}
}

// TestBenchmarkResultRequestAccounting: a point measured by the recipe's
// benchmark stores InferenceX's own result file as its aggregate. Its
// request_accounting (warmup and error drops) reaches the export as
// written; the file has no "failed" or "num_warmups" keys to rebuild it from.
func TestBenchmarkResultRequestAccounting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache"
	require.NoError(t, f.store.UpsertPoint(ctx, results.Point{SweepID: "bm", PointID: id, Identity: "fpA", ConfigKey: "k", ExpName: id,
		Conc: 768, Status: "completed", SpecJSON: spec(id, "k", 768, 64, 32, 32, disaggRow)}))
	// What process_agentic_result.py writes: num_requests_total is
	// records_total, warmup calls included (768 lanes x 1 warmup call).
	acc := resultfile.RequestAccounting{RecordsTotal: 19200, RecordsProfiled: 18400, RecordsDroppedTotal: 800, RecordsWarmupDropped: 768,
		RecordsErrorDropped: 32, ErrorCategories: map[string]int{"timeout": 32}}
	res := resultfile.Result{ScenarioType: resultfile.ScenarioAgentic, Conc: 768, NumRequestsTotal: 19200, NumRequestsSuccess: 18400, RequestAccounting: acc,
		Multinode: &resultfile.Multinode{NumPrefillGPU: 32, NumDecodeGPU: 32}}
	data, err := json.Marshal(&res)
	require.NoError(t, err)
	require.NotContains(t, string(data), `"failed"`)
	require.NotContains(t, string(data), `"num_warmups"`)
	uri, err := f.arts.Put(ctx, "ix_conc768.json", bytes.NewReader(data))
	require.NoError(t, err)
	sum, _ := json.Marshal(map[string]any{"aggregate_uri": uri})
	require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "bm", PointID: id, Identity: "fpA", ConfigKey: "k", ExpName: id, Conc: 768,
		JSON: sum, PerfSummary: point.PerfSummary{OutputTputPerGPU: 5958.8, Requests: 18432, Failed: 32}}))

	e, err := Build(ctx, f.store, f.arts, "bm")
	require.NoError(t, err)
	require.Len(t, e.Bmk, 1)
	got, err := json.Marshal(e.Bmk[0]["request_accounting"])
	require.NoError(t, err)
	want, _ := json.Marshal(acc)
	assert.JSONEq(t, string(want), string(got))
	assert.EqualValues(t, 19200, e.Bmk[0]["num_requests_total"])
	assert.EqualValues(t, 18400, e.Bmk[0]["num_requests_successful"])
}

// TestExportPowerFields: a point's power figures go into its agg_bmk row as
// InferenceX's with_power_metrics writes them (energy.Figures.ResultFields),
// a power-invalid point's row says power_valid 0 and keeps its perf fields.
func TestExportPowerFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.UpsertSweep(ctx, results.Sweep{ID: "sw", Name: "seed", Status: "completed"}))
	put := func(id string, conc int, pw *energy.Figures) {
		pid := "dsr1_1k1k-c" + id
		require.NoError(t, f.store.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: pid, Identity: "fp" + id, ConfigKey: "dsr1-fp8-gb200-dynamo-trt",
			ExpName: "dsr1_1k1k", Topology: "TP4 agg", Conc: conc, Status: "completed", SpecJSON: spec(pid, "dsr1-fp8-gb200-dynamo-trt", conc, 4, 4, 0, fixedRow)}))
		sum := point.PerfSummary{OutputTputPerGPU: 5000, TputPerGPU: 10000, Interactivity: 50, TTFTp90Ms: 300, Power: pw}
		js, err := json.Marshal(sum)
		require.NoError(t, err)
		require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pid, Identity: "fp" + id, ConfigKey: "dsr1-fp8-gb200-dynamo-trt",
			ExpName: "dsr1_1k1k", Conc: conc, JSON: js, PerfSummary: sum}))
	}
	put("64", 64, &energy.Figures{Source: energy.SourceNVML, Valid: true, AvgPowerW: 562.5004, TotalGPUEnergyJ: 9000, JoulesPerOutputToken: 6.0000004, JoulesPerTotalToken: 2})
	put("128", 128, &energy.Figures{Source: energy.SourceNVML, Reasons: []string{energy.ReasonGap}})
	e, err := Build(ctx, f.store, f.arts, "sw")
	require.NoError(t, err)
	require.Len(t, e.Bmk, 2)
	rows := map[string]map[string]any{}
	for _, r := range e.Bmk {
		rows[r["point_id"].(string)] = r
	}
	ok, bad := rows["dsr1_1k1k-c64"], rows["dsr1_1k1k-c128"]
	assert.Equal(t, 2, ok["power_metric_schema_version"])
	assert.Equal(t, 1, ok["power_valid"])
	assert.Equal(t, "nvml", ok["power_source"])
	assert.Equal(t, 562.5, ok["avg_power_w"], "watts to 3 decimals")
	assert.Equal(t, 6.0, ok["joules_per_output_token"], "per token to 6 decimals")
	assert.Equal(t, 0, bad["power_valid"])
	assert.NotContains(t, bad, "joules_per_output_token")
	assert.Equal(t, 5000.0, bad["output_tput_per_gpu"], "perf fields kept")
}
