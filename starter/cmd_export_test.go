package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// ledgerHome writes a worker-style home (<home>/results.db, <home>/artifacts)
// with sweep "sw" (one agentic point: spec, perf with its aggregate
// artifact, eval with its record) and sweep "base" (the same point, faster).
func ledgerHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	ctx := context.Background()
	s, err := results.Open(ctx, filepath.Join(home, "results.db"))
	require.NoError(t, err)
	defer s.Close()
	arts, err := artifacts.NewDirStore(filepath.Join(home, "artifacts"))
	require.NoError(t, err)
	put := func(name string, v any) string {
		b, _ := json.Marshal(v)
		uri, err := arts.Put(ctx, name, strings.NewReader(string(b)))
		require.NoError(t, err)
		return uri
	}
	row := `{"image":"img:1","model":"deepseek-ai/DeepSeek-V4-Pro-0813","model-prefix":"dsv4","precision":"fp4","framework":"dynamo-sglang",
		"runner":"cluster:gb200-nv","spec-decoding":"mtp","prefill":{"num-worker":1,"tp":8,"ep":1,"dp-attn":false,"pp":1,"dcp-size":1,"pcp-size":1},
		"decode":{"num-worker":0,"tp":8,"ep":1,"dp-attn":false,"pp":1,"dcp-size":1,"pcp-size":1},"conc":[4],"kv-offloading":"dram",
		"total-cpu-dram-gb":721,"exp-name":"dsv4_p1x8_d0x8_conc4_kvdram-hicache","disagg":false,"scenario-type":"agentic-coding"}`
	spec, _ := json.Marshal(map[string]any{"point_id": "dsv4_p1x8_d0x8_conc4_kvdram-hicache", "prefill_gpus": 8, "row": json.RawMessage(row)})
	for i, sweep := range []string{"base", "sw"} {
		slow := 1 + 0.25*float64(i)
		start := time.Date(2026, 11, 1+i, 2, 0, 0, 0, time.UTC)
		require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: sweep, Name: "seed", Status: "completed", StartedAt: start, FinishedAt: start.Add(time.Minute)}))
		pid := "dsv4_p1x8_d0x8_conc4_kvdram-hicache"
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: pid, Identity: "id" + sweep, BaselineKey: "agg-c4", ConfigKey: "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg",
			ExpName: pid, Topology: "TP8 agg", Conc: 4, Status: "completed", SpecJSON: spec}))
		agg := put("agg.json", map[string]any{"simulated": true, "num_requests_total": 96, "num_requests_successful": 96, "num_prefill_gpu": 8, "num_decode_gpu": 0,
			"request_metrics": map[string]any{"latency": map[string]any{"ttft": map[string]float64{"p90": 0.0106 * slow}}}})
		sum, _ := json.Marshal(map[string]any{"aggregate_uri": agg, "simulated": true})
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: pid, Identity: "id" + sweep, ConfigKey: "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg", ExpName: pid, Conc: 4, JSON: sum, PerfSummary: point.PerfSummary{OutputTputPerGPU: 4789 / slow, Interactivity: 340 / slow, TTFTp90Ms: 10.6 * slow, Simulated: true}}))
		rec := put("eval.json", map[string]any{"task": "gsm8k", "em_strict": 0.95, "em_strict_se": 0.006, "n_eff": 1319, "simulated": true})
		esum, _ := json.Marshal(map[string]any{"result_uri": rec})
		require.NoError(t, s.PutEval(ctx, results.EvalResult{SweepID: sweep, PointID: pid, Identity: "id" + sweep, EMStrict: 0.95, NEff: 1319, Floor: 0.91, Passed: true, Simulated: true, JSON: esum}))
	}
	return home
}

func TestExportCommand(t *testing.T) {
	t.Parallel()
	home := ledgerHome(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int // 0: success
		wantMsg  string
	}{
		{name: "writes both files", args: []string{"--home", home, "--sweep", "sw", "--format", "ix", "--out", "OUT"}},
		{name: "explicit DSN", args: []string{"--results", "sqlite://" + filepath.Join(home, "results.db"), "--artifacts", filepath.Join(home, "artifacts"), "--sweep", "sw", "--out", "OUT", "--json"}},
		{name: "no sweep", args: []string{"--home", home}, wantCode: 2, wantMsg: "--sweep ID is required"},
		{name: "unknown format", args: []string{"--home", home, "--sweep", "sw", "--format", "csv"}, wantCode: 2, wantMsg: `--format "csv"`},
		{name: "stray argument", args: []string{"--home", home, "--sweep", "sw", "extra"}, wantCode: 2, wantMsg: `unexpected argument "extra"`},
		{name: "unknown sweep", args: []string{"--home", home, "--sweep", "nope", "--out", "OUT"}, wantCode: 1, wantMsg: `"nope" has no rows`},
		{name: "no ledger at home", args: []string{"--home", filepath.Join(home, "missing"), "--sweep", "sw"}, wantCode: 1, wantMsg: "no results store at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ix")
			args := append([]string(nil), tc.args...)
			for i := range args {
				if args[i] == "OUT" {
					args[i] = out
				}
			}
			err := runExport(args)
			if tc.wantCode != 0 {
				requireExit(t, err, tc.wantCode, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			var bmk, evals []map[string]any
			data, err := os.ReadFile(filepath.Join(out, "agg_bmk.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &bmk))
			data, err = os.ReadFile(filepath.Join(out, "agg_eval_all.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &evals))
			require.Len(t, bmk, 1)
			require.Len(t, evals, 1)
			assert.Equal(t, "cluster:gb200-nv", bmk[0]["hw"])
			assert.Equal(t, "agentic-coding", bmk[0]["scenario_type"])
			assert.Equal(t, true, bmk[0]["simulated"])
			assert.Equal(t, 96.0, bmk[0]["num_requests_total"])
			assert.Equal(t, "gsm8k", evals[0]["task"])
			assert.Equal(t, "fp4", evals[0]["precision"])
			assert.Equal(t, true, evals[0]["simulated"])
		})
	}
}
