package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/accounting"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// statsLedger holds one 2-node point: allocated at minute 1, staging
// [1,3], bring-up [3,5], perf [5,15] whose first attempt hit a CUDA OOM at
// 9 (so [5,9] is lost and the retry, taken as 4 min too, leaves [9,11]
// held and [11,15] perf), teardown [15,16]: 30 node-minutes.
func statsLedger(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "results.db")
	s, err := results.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := func(x int) time.Time { return t0.Add(time.Duration(x) * time.Minute) }
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "st", StartedAt: t0}))
	require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "st", PointID: "p1", Identity: "dep1-c4", ConfigKey: "ck",
		UpdatedAt: m(20), SpecJSON: []byte(`{"nodes":2,"deployment_hash":"dep1"}`)}))
	run := func(stage string, a, b int, fs ...failure.Attempt) results.StageRun {
		return results.StageRun{Stage: stage, Outcome: "ok", Rounds: 1, StartedAt: m(a), EndedAt: m(b), Failures: fs}
	}
	require.NoError(t, s.PutStageRuns(ctx, "st", "p1", []results.StageRun{
		run("allocate", 0, 1), run("checkpoint", 1, 3), run("bringup", 3, 5),
		run("perf", 5, 15, failure.Attempt{Failure: failure.Failure{Class: failure.CUDAOOM, Excerpt: "CUDA out of memory"}, At: m(9)}),
		run("teardown", 15, 16), run("upload", 16, 17)}))
	require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "st", PointID: "p1", Identity: "dep1-c4", JSON: []byte(`{}`)}))
	return dsn
}

func TestStatsJSON(t *testing.T) {
	t.Parallel()
	dsn := statsLedger(t)
	var out bytes.Buffer
	require.NoError(t, runStats([]string{"--results", dsn, "--sweep", "st", "--json"}, &out))
	var got struct {
		Total      *float64           `json:"total_node_minutes"`
		Categories map[string]float64 `json:"categories"`
		Useful     *float64           `json:"useful_fraction"`
		Classes    []struct {
			Class       string   `json:"class"`
			Attempts    *int     `json:"attempts"`
			NodeMinutes *float64 `json:"node_minutes"`
		} `json:"failure_classes"`
	}
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	require.NoError(t, dec.Decode(&got), out.String())
	require.NotNil(t, got.Total, "total_node_minutes")
	require.NotNil(t, got.Useful, "useful_fraction")
	assert.InDelta(t, 30.0, *got.Total, 1e-9)
	want := map[string]float64{"staging": 4, "bring-up": 4, "warmup": 0, "perf": 8, "eval-restart": 0, "eval": 0,
		"teardown": 2, "held-for-operator": 4, "failed:cuda-oom": 8}
	assert.InDeltaMapValues(t, want, got.Categories, 1e-9)
	var sum float64
	for _, c := range []string{"staging", "bring-up", "warmup", "perf", "eval-restart", "eval", "teardown", "held-for-operator", "failed:cuda-oom"} {
		sum += got.Categories[c]
	}
	assert.Equal(t, *got.Total, sum)
	assert.InDelta(t, 8.0/30, *got.Useful, 1e-12)
	require.Len(t, got.Classes, 1)
	assert.Equal(t, "cuda-oom", got.Classes[0].Class)
	require.NotNil(t, got.Classes[0].Attempts)
	require.NotNil(t, got.Classes[0].NodeMinutes)
	assert.Equal(t, 1, *got.Classes[0].Attempts)
	assert.InDelta(t, 8.0, *got.Classes[0].NodeMinutes, 1e-9)

	out.Reset()
	require.NoError(t, runStats([]string{"--results", dsn, "--config-key", "ck", "--since", "2026-11-30"}, &out))
	for _, s := range []string{"30.0 node-minutes (0.50 node-hours) in 1 allocations of 1 sweeps", "useful fraction: 26.7 %",
		"failed:cuda-oom", "cuda-oom  1         8.0", "CLUSTER"} {
		assert.Contains(t, out.String(), s)
	}
	out.Reset()
	require.NoError(t, runStats([]string{"--results", dsn, "--since", "2026-12-02", "--json"}, &out))
	assert.Contains(t, out.String(), `"total_node_minutes": 0`)
	requireExit(t, runStats([]string{"--results", dsn, "--sweep", "nope"}, &out), 1, `"nope" has no rows`)
	requireExit(t, runStats([]string{"--results", dsn, "--since", "last week"}, &out), 2, `--since "last week"`)
}

// TestStatsShowsEnergy: starter stats prints the GPU energy of the perf
// windows beside the node-hours, per power source, simulated apart, with the
// power-invalid points counted.
func TestStatsShowsEnergy(t *testing.T) {
	t.Parallel()
	dsn := statsLedger(t)
	ctx := context.Background()
	s, err := results.Open(ctx, dsn)
	require.NoError(t, err)
	put := func(pid string, pw *energy.Figures) {
		sum := point.PerfSummary{OutputTputPerGPU: 100, Simulated: pw.Simulated, Power: pw}
		js, err := json.Marshal(sum)
		require.NoError(t, err)
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "st", PointID: pid, Identity: "id-" + pid, ConfigKey: "ck", PerfSummary: sum, JSON: js}))
	}
	// 3.6 MJ = 1 kWh over 1.2 M output tokens (3 J/token), and 7.2 MJ over
	// 1.8 M (4 J/token): 3 kWh, 10.8 MJ / 3 M tokens = 3.6 J/token.
	put("p2", &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, TotalGPUEnergyJ: 3.6e6, JoulesPerOutputToken: 3})
	put("p3", &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, TotalGPUEnergyJ: 7.2e6, JoulesPerOutputToken: 4})
	put("p4", &energy.Figures{Source: energy.SourceDCGM, Reasons: []string{energy.ReasonDeviceMissing}})
	s.Close()
	var out bytes.Buffer
	require.NoError(t, runStats([]string{"--results", dsn, "--sweep", "st"}, &out))
	assert.Contains(t, out.String(), "GPU energy in perf windows, by power source:\n"+
		"  dcgm-power: 0.000 kWh over 0 points, 0 J/output token; 1 points power-invalid\n"+
		"  simulated, SIMULATED: 3.000 kWh over 2 points, 3.6 J/output token\n")
	out.Reset()
	require.NoError(t, runStats([]string{"--results", dsn, "--sweep", "st", "--json"}, &out))
	var got struct {
		Energy accounting.EnergySummary `json:"energy"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got.Energy.Sources, 2)
	assert.InDelta(t, 3.0, got.Energy.Sources[1].EnergyKWh, 1e-12)
	assert.InDelta(t, 3.6, got.Energy.Sources[1].JoulesPerOutputToken, 1e-12)
}
