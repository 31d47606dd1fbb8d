package budgetcheck

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/results"
)

func TestMarginOf(t *testing.T) {
	assert.Equal(t, 2*time.Minute, DefaultMargin.Of(4*time.Minute), "the minimum")
	assert.Equal(t, 5*time.Minute, DefaultMargin.Of(20*time.Minute), "a quarter")
}

// TestCheckWarnsBelowObservedP90: a deployment whose ledger bring-ups took
// 20-26 minutes gets a warning naming the recipe line, the budget and the
// figure; one with a roomy budget, one never run and an eval restart (a
// second bring-up after perf) do not count.
func TestCheckWarnsBelowObservedP90(t *testing.T) {
	ctx := context.Background()
	store, err := results.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	require.NoError(t, err)
	defer store.Close()
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	tight, roomy := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for i, m := range []int{20, 22, 26, 21, 23} {
		sweep := "sw" + string(rune('0'+i))
		for _, dep := range []string{tight, roomy} {
			pid := "p-" + dep[:4]
			require.NoError(t, store.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: pid, Identity: dep + "-c64", Status: "completed"}))
			at := t0
			step := func(stage string, d time.Duration) results.StageRun {
				r := results.StageRun{Stage: stage, Outcome: "ok", Rounds: 1, StartedAt: at, EndedAt: at.Add(d)}
				at = at.Add(d)
				return r
			}
			require.NoError(t, store.PutStageRuns(ctx, sweep, pid, []results.StageRun{
				step("allocate", time.Minute), step("bringup", time.Duration(m)*time.Minute), step("perf", time.Hour),
				step("bringup", 3*time.Hour), // the eval restart: not a first bring-up
				step("eval", 10*time.Minute),
			}))
		}
	}
	hc := func(line, attempts int) *config.Recipe {
		return &config.Recipe{HealthCheck: config.HealthCheck{Pos: strictyaml.Pos{File: "recipes/x.yaml", Line: line}, MaxAttempts: attempts, IntervalSeconds: 10}}
	}
	p := &plan.Plan{Points: []plan.Point{
		{ID: "tight-c64", ConfigKey: "dsv4-fp4-gb200-dynamo-sglang", DeploymentHash: tight, RecipePath: "recipes/x.yaml", Recipe: hc(41, 180)}, // 30 min
		{ID: "tight-c128", DeploymentHash: tight, Recipe: hc(41, 180)},                                                                         // same deployment: judged once
		{ID: "roomy-c64", DeploymentHash: roomy, Recipe: hc(12, 1440)},                                                                         // 4 h
		{ID: "new-c64", DeploymentHash: strings.Repeat("c", 64), Recipe: hc(3, 6)},                                                             // never ran
	}}
	ws, err := Check(ctx, store, p, DefaultMargin)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	w := ws[0]
	assert.Equal(t, 26*time.Minute, w.P90, "5 runs: the largest")
	assert.Equal(t, 6*time.Minute+30*time.Second, w.Margin)
	assert.Equal(t, 30*time.Minute, w.Budget)
	assert.Equal(t, 5, w.Runs)
	assert.Equal(t, "health-budget recipes/x.yaml:41: health_check budget 30m0s is below the observed bring-up p90 26m0s + margin 6m30s over 5 run(s) of deployment aaaaaaaaaaaa (dsv4-fp4-gb200-dynamo-sglang); want >= 32m30s", w.String())
}
