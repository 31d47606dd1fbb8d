package forecast_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// stageRuns lays out a point's stage runs one after another from t0:
// (stage, outcome, minutes) triples.
func stageRuns(t0 time.Time, runs ...any) []results.StageRun {
	var out []results.StageRun
	at := t0
	for i := 0; i < len(runs); i += 3 {
		d := time.Duration(runs[i+2].(int)) * time.Minute
		out = append(out, results.StageRun{Stage: runs[i].(string), Outcome: point.Outcome(runs[i+1].(string)), Rounds: 1, StartedAt: at, EndedAt: at.Add(d)})
		at = at.Add(d)
	}
	return out
}

// TestForecastFromLedger: a deployment the ledger has run (two points on
// one allocation, in two sweeps) is forecast with the medians it measured:
// its bring-up, warmup, eval restart, eval, queue wait and teardown; a
// deployment it has never run keeps the profile's and the flags' times.
// The sources say which figure came from where.
func TestForecastFromLedger(t *testing.T) {
	ctx := context.Background()
	store, err := results.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	defer store.Close()
	const measured, fresh = "aaaa1111", "bbbb2222"
	t0 := time.Date(2026, 9, 1, 2, 0, 0, 0, time.UTC)
	for i, bringUp := range []int{30, 40} {
		sweep := []string{"night-1", "night-2"}[i]
		// c8 brings the server up and hands it on; c16 evals on a restart.
		require.NoError(t, store.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: "p-c8", Identity: measured + "-c8", Status: point.StatusCompleted}))
		require.NoError(t, store.PutStageRuns(ctx, sweep, "p-c8", stageRuns(t0,
			point.StageAllocate, "ok", 3, point.StageCheckpoint, "ok", 2, point.StageBringUp, "ok", bringUp,
			point.StageWarmup, "ok", 7, point.StagePerf, "ok", 60, point.StageUpload, "ok", 1)))
		require.NoError(t, store.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: "p-c16", Identity: measured + "-c16", Status: point.StatusCompleted}))
		require.NoError(t, store.PutStageRuns(ctx, sweep, "p-c16", stageRuns(t0,
			point.StageAllocate, "shared", 0, point.StageBringUp, "shared", 0, point.StageWarmup, "ok", 9,
			point.StagePerf, "ok", 60, point.StageBringUp, "ok", 25, point.StageEval, "ok", 12, point.StageTeardown, "ok", 1)))
	}
	// Another deployment's identity shares no prefix with "aaaa1111-c".
	require.NoError(t, store.UpsertPoint(ctx, results.Point{SweepID: "night-1", PointID: "q", Identity: measured + "0-c8"}))
	require.NoError(t, store.PutStageRuns(ctx, "night-1", "q", stageRuns(t0, point.StageBringUp, "ok", 500)))

	m, err := forecast.FromLedger(ctx, store, []string{measured, fresh})
	require.NoError(t, err)
	require.Contains(t, m, measured)
	require.NotContains(t, m, fresh, "never run: nothing measured")
	got := m[measured]
	assert.Equal(t, 35*time.Minute, got.Median[forecast.TimeBringUp], "median of 30 and 40")
	assert.Equal(t, 2, got.Runs[forecast.TimeBringUp])
	assert.Equal(t, 8*time.Minute, got.Median[forecast.TimeWarmup], "median of 7, 9, 7, 9")
	assert.Equal(t, 25*time.Minute, got.Median[forecast.TimeEvalRestart], "a bring-up on a server that ran perf is the eval restart")
	assert.Equal(t, 12*time.Minute, got.Median[forecast.TimeEval])
	assert.Equal(t, 3*time.Minute, got.Median[forecast.TimeQueueWait])
	assert.Equal(t, time.Minute, got.Median[forecast.TimeTeardown])
	assert.NotContains(t, got.Median, forecast.TimePerf, "the row says how long perf runs")

	pts := []point.Spec{
		{PointID: "p-c8", Conc: 8, Nodes: 3, DeploymentHash: measured, DurationSec: 3600},
		{PointID: "p-c16", Conc: 16, Nodes: 3, DeploymentHash: measured, DurationSec: 3600, Eval: true, SyntheticAL: 3},
		{PointID: "r-c8", Conc: 8, Nodes: 2, DeploymentHash: fresh, DurationSec: 3600},
	}
	in := workflows.SweepInput{SweepID: "f", Name: "f", NodeBudget: 18, Points: pts}
	c, err := runner.Run(in, forecast.Inputs{Profile: forecast.Profile{Name: "rack", Nodes: 18, GPUsPerNode: 4, BringUp: 20 * time.Minute},
		Assumptions: forecast.DefaultAssumptions(), Measured: m})
	require.NoError(t, err)
	// Measured: 3 min queue, 2 staging, 35 bring-up, 2 x (8 + 60), 25
	// restart, 12 eval, 1 teardown on 3 nodes; fresh: 20 + 5 + 60 on 2.
	assert.InDelta(t, (3*(2+35+2*68+25+12+1)+2*85)/60.0, c.NodeHours, 1e-9)
	assert.InDelta(t, (3+2+35+2*68+25+12+1)/60.0, c.MakespanHours, 1e-9)
	from := map[string][]string{}
	for _, s := range c.Sources {
		from[s.Time] = append(from[s.Time], s.From)
	}
	assert.Equal(t, []string{"profile bring-up-time", "ledger (median of 2 runs)"}, from[forecast.TimeBringUp], "20 min fresh, 35 measured")
	assert.Equal(t, []string{"assumed (--warmup)", "ledger (median of 4 runs)"}, from[forecast.TimeWarmup])
	assert.Equal(t, []string{"ledger (median of 2 runs)"}, from[forecast.TimeEvalRestart])
	assert.Equal(t, []string{"row duration"}, from[forecast.TimePerf])
}
