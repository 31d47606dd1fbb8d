package e2e

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
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// bringUps counts the BringUp activities a workflow scheduled, per mode
// (read from each activity's input in the history).
func (e *itEnv) bringUps(wid string) map[string]int {
	it := e.c.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	out := map[string]int{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "BringUp" {
			continue
		}
		var in activities.StageInput
		require.NoError(e.t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
		out[in.Mode]++
	}
	return out
}

// TestIntegrationSeedSweepSharesBringUps is issue 12's acceptance for item 5
// on the real dev server with the simulated GB200 partition: the seed sweep
// brings servers up 6 times for perf instead of 8 (the 2P1D c768, c1024 and
// c1280 share one allocation and one server), restarts once in eval mode per
// deployment with an eval, and every point keeps its own workflow, status and
// figures: each ledger row holds the aggregate measured at its own
// concurrency.
func TestIntegrationSeedSweepSharesBringUps(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()
	id := "it-shared-bringup"
	in := e.sweep(id, []string{"conc1_", "conc4_", "conc64_", "conc128_", "conc256_", "conc768_", "conc1024_", "conc1280_"}, nil)
	e.start(in)
	if os.Getenv("SWEEPFLOW_IT_TRACE") != "" {
		// Print the sweep's status table every 20 s while it runs.
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Second):
					out, _ := e.cli("status", id)
					t.Log(out)
				}
			}
		}()
	}
	// Agentic perf runs drain their in-flight calls: on a busy 2-core
	// machine the whole seed sweep takes 3-8 minutes.
	pr := e.wait(id, 12*time.Minute)
	require.Len(t, pr.Points, 8)
	require.Equal(t, 8, pr.Counts[point.StatusCompleted]+pr.Counts[point.StatusEvalFailed], "%+v", pr.Counts)

	// Bring-ups per mode and allocations, summed over the point workflows.
	modes := map[string]int{}
	allocs := 0
	for _, p := range pr.Points {
		require.Equal(t, workflows.PointWorkflowID(id, p.PointID), p.WorkflowID)
		for m, n := range e.bringUps(p.WorkflowID) {
			modes[m] += n
		}
		n, _ := e.activityRuns(p.WorkflowID, "Allocate")
		allocs += n
	}
	assert.Equal(t, 6, modes["perf"], "6 perf bring-ups for 8 points")
	assert.Equal(t, 4, modes["eval"], "one eval restart per deployment with an eval")
	assert.Equal(t, 6, allocs, "one allocation per deployment")
	assert.LessOrEqual(t, pr.MaxInUse, 18)

	// The ledger's stage runs say the same: bring-ups that ran, and the
	// ones a point took over from the previous point of its deployment.
	store := e.ledger()
	runs, err := store.StageRuns(context.Background(), id)
	require.NoError(t, err)
	ran, shared := 0, map[string]bool{}
	for _, r := range runs {
		if r.Stage == point.StageBringUp && r.Outcome == "ok" {
			ran++
		}
		if r.Stage == point.StageBringUp && r.Outcome == "shared" {
			shared[r.PointID] = true
		}
	}
	assert.Equal(t, 10, ran, "6 perf bring-ups + 4 eval restarts in the ledger")
	require.Len(t, shared, 2, "c1024 and c1280 used the c768 server")
	for p := range shared {
		assert.True(t, strings.Contains(p, "conc1024_") || strings.Contains(p, "conc1280_"), p)
	}

	// Figures per point: each perf row is the aggregate measured at the
	// point's own concurrency, and the three shared-server points differ.
	arts, err := artifacts.Open(filepath.Join(e.home, "artifacts"))
	require.NoError(t, err)
	perf := e.perfByIdentity(store, id)
	require.Len(t, perf, 8)
	tputs := map[float64]bool{}
	for _, p := range in.Points {
		r, ok := perf[p.Identity]
		require.True(t, ok, "no perf row for %s", p.PointID)
		assert.Equal(t, p.PointID, r.PointID)
		assert.Equal(t, p.Conc, r.Conc)
		rc, err := arts.Open(context.Background(), r.AggregateURI)
		require.NoError(t, err)
		var agg struct {
			Conc       int     `json:"conc"`
			OutputTput float64 `json:"output_tput_per_gpu"`
		}
		require.NoError(t, json.NewDecoder(rc).Decode(&agg))
		rc.Close()
		assert.Equal(t, p.Conc, agg.Conc, "%s: the ledger row holds the run at its own concurrency", p.PointID)
		if strings.Contains(p.PointID, "p2x16") {
			tputs[r.OutputTputPerGPU] = true
		}
	}
	assert.Len(t, tputs, 3, "c768, c1024 and c1280 measured separately on the shared server")

	// Node-hours: shared allocations and bring-ups are booked once, so the
	// books equal the allocations' node-minutes in history.
	cats := e.requireNodeHoursAddUp(id)
	assert.Greater(t, cats["eval-restart"], 0.0, "%v", cats)

	// Nothing is left running or held.
	assert.Empty(t, e.list(`SweepflowKind = "deployment" AND ExecutionStatus = "Running"`))

	// The 2P1D deployment and its c1024 point, which took the c768 server
	// over, replay in package workflows.
	for _, p := range in.Points {
		if strings.Contains(p.PointID, "conc1024_") {
			e.recordHistories(map[string]string{
				"deployment-shared.json": workflows.DeploymentWorkflowID(id, p.DeploymentKey()),
				"point-shared.json":      workflows.PointWorkflowID(id, p.PointID),
			})
		}
	}
}
