package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

const (
	covAggKey    = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg"
	covDisaggKey = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"
)

// coverageHome writes a ledger with sweep "cov" shaped like the seed
// review's complaint: the disagg curve jumps from 20 s to 100 s median E2EL
// between c256 and c768; everything else steps less than 2x.
func coverageHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	ctx := context.Background()
	s, err := results.Open(ctx, filepath.Join(home, "results.db"))
	require.NoError(t, err)
	defer s.Close()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "cov", Name: "seed", Status: "completed", StartedAt: start, FinishedAt: start.Add(time.Hour)}))
	pts := []struct {
		key          string
		conc         int
		e2el, intvty float64
	}{
		{covAggKey, 1, 2.5, 353}, {covAggKey, 4, 3, 340},
		{covDisaggKey, 64, 8, 313}, {covDisaggKey, 128, 12, 293}, {covDisaggKey, 256, 20, 284},
		{covDisaggKey, 768, 100, 217}, {covDisaggKey, 1024, 140, 189}, {covDisaggKey, 1280, 170, 166},
	}
	for _, p := range pts {
		pid := fmt.Sprintf("%s-c%d", p.key[len(p.key)-6:], p.conc)
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "cov", PointID: pid, Identity: "id-" + pid, ConfigKey: p.key, ExpName: pid, Conc: p.conc, Status: "completed"}))
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "cov", PointID: pid, Identity: "id-" + pid, ConfigKey: p.key, ExpName: pid, Conc: p.conc,
			PerfSummary: point.PerfSummary{OutputTputPerGPU: float64(p.conc) * 3, Interactivity: p.intvty, E2ELMedianMs: p.e2el * 1000, TPOTMedianMs: 1000 / p.intvty, Simulated: true}}))
	}
	return home
}

var seedGap = curvegaps.Gap{ConfigKey: covDisaggKey, Metric: curvegaps.MetricE2EL, From: curvegaps.End{Conc: 256, Value: 20}, To: curvegaps.End{Conc: 768, Value: 100}, SuggestConc: []int{369, 533}}

const (
	fixtureFixed   = "dsr1 | b200 | sglang | fp8 | none | agg | fixed-seq-len | 8192/1024"
	fixtureAgentic = "dsv4 | gb200-nv | dynamo-sglang | fp4 | mtp | disagg | agentic-coding"
)

func TestCoverageCommand(t *testing.T) {
	t.Parallel()
	home := coverageHome(t)
	fixture := filepath.Join("testdata", "coverage", "agg_bmk.json")
	// The fixture has no config keys, as InferenceX publishes its rows: TP4
	// and TP8 share one fixed-seq-len curve; TP8 jumps from c64 to c256.
	fixtureGaps := []curvegaps.Gap{
		{ConfigKey: fixtureFixed, Metric: curvegaps.MetricE2EL, From: curvegaps.End{Conc: 64, Value: 35}, To: curvegaps.End{Conc: 256, Value: 90}, SuggestConc: []int{128}},
		{ConfigKey: fixtureFixed, Metric: curvegaps.MetricIntvty, From: curvegaps.End{Conc: 64, Value: 40}, To: curvegaps.End{Conc: 256, Value: 18}, SuggestConc: []int{128}},
		{ConfigKey: fixtureAgentic, Metric: curvegaps.MetricE2EL, From: curvegaps.End{Conc: 256, Value: 20}, To: curvegaps.End{Conc: 768, Value: 100}, SuggestConc: []int{369, 533}},
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
		wantGaps []curvegaps.Gap // with --json
		contains []string        // human output
	}{
		{name: "ledger sweep, table", args: []string{"cov", "--home", home},
			contains: []string{"sweep cov: 2 curves, 8 points, 1 gaps wider than x2", "CURVE", covDisaggKey, "median_e2el", "c256 20 s", "c768 100 s", "x5.0", "369 533",
				"concurrencies to add per curve:\n  " + covDisaggKey + ": 369 533"}},
		{name: "ledger sweep, json", args: []string{"cov", "--home", home, "--json"}, wantGaps: []curvegaps.Gap{seedGap}},
		{name: "ledger by DSN", args: []string{"cov", "--results", "sqlite://" + filepath.Join(home, "results.db"), "--json"}, wantGaps: []curvegaps.Gap{seedGap}},
		{name: "ledger, factor 6: no gaps", args: []string{"cov", "--home", home, "--factor", "6"}, contains: []string{"0 gaps wider than x6"}},
		{name: "agg_bmk fixture, json", args: []string{"--results", fixture, "--json"}, wantGaps: fixtureGaps},
		{name: "agg_bmk fixture twice merges the curves", args: []string{"--results", fixture, fixture, "--json"}, wantGaps: fixtureGaps},
		{name: "agg_bmk fixture, table", args: []string{"--results", fixture},
			contains: []string{"2 curves, 15 points, 3 gaps", fixtureFixed, "median_intvty", "c256 18 tok/s/user", "128"}},
		{name: "agg_bmk fixture, factor 3", args: []string{"--results", fixture, "--factor", "3", "--json"},
			wantGaps: []curvegaps.Gap{{ConfigKey: fixtureAgentic, Metric: curvegaps.MetricE2EL, From: curvegaps.End{Conc: 256, Value: 20}, To: curvegaps.End{Conc: 768, Value: 100}, SuggestConc: []int{443}}}},
		{name: "nothing to read", args: []string{"--home", home}, wantCode: 2, wantMsg: "give a SWEEP_ID or --results"},
		{name: "factor not above 1", args: []string{"cov", "--home", home, "--factor", "1"}, wantCode: 2, wantMsg: "--factor must be above 1"},
		{name: "two sweeps", args: []string{"cov", "cov2", "--home", home}, wantCode: 2, wantMsg: `unexpected argument "cov2"`},
		{name: "sweep with two stores", args: []string{"cov", "--results", "a.db", "b.db"}, wantCode: 2, wantMsg: "names one results store"},
		{name: "unknown sweep", args: []string{"nope", "--home", home}, wantCode: 1, wantMsg: `sweep "nope" has no perf results`},
		{name: "no ledger at home", args: []string{"cov", "--home", filepath.Join(home, "missing")}, wantCode: 1, wantMsg: "no results store at"},
		{name: "not an agg_bmk", args: []string{"--results", filepath.Join(home, "results.db")}, wantCode: 1, wantMsg: "give SWEEP_ID before --results"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runCoverage(tc.args, &out)
			if tc.wantCode != 0 {
				requireExit(t, err, tc.wantCode, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			if tc.wantGaps != nil {
				var res curvegaps.Result
				require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
				assert.Equal(t, tc.wantGaps, res.Gaps)
			}
			for _, c := range tc.contains {
				assert.Contains(t, out.String(), c)
			}
		})
	}
}

// TestCoverageOfExport runs coverage on what starter export writes: the
// same sweep read from the ledger and from its agg_bmk.json gives the same
// gaps (the export keeps config keys and median E2EL in seconds).
func TestCoverageOfExport(t *testing.T) {
	t.Parallel()
	home := coverageHome(t)
	dir := filepath.Join(t.TempDir(), "export")
	require.NoError(t, runExport([]string{"--home", home, "--sweep", "cov", "--out", dir, "--json"}))
	_, err := os.Stat(filepath.Join(dir, curvegaps.BmkFile))
	require.NoError(t, err)
	var fromLedger, fromDir, fromFile bytes.Buffer
	require.NoError(t, runCoverage([]string{"cov", "--home", home, "--json"}, &fromLedger))
	require.NoError(t, runCoverage([]string{"--results", dir, "--json"}, &fromDir))
	require.NoError(t, runCoverage([]string{"--results", filepath.Join(dir, curvegaps.BmkFile), "--json"}, &fromFile))
	assert.JSONEq(t, fromLedger.String(), fromDir.String())
	assert.JSONEq(t, fromLedger.String(), fromFile.String())
	var res curvegaps.Result
	require.NoError(t, json.Unmarshal(fromDir.Bytes(), &res))
	assert.Equal(t, []curvegaps.Gap{seedGap}, res.Gaps)
}
