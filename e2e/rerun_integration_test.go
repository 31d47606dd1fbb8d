package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// perfByIdentity reads a sweep's perf figures from the ledger.
func (e *itEnv) perfByIdentity(store *results.Store, sweep string) map[string]results.PerfResult {
	perf, err := store.Perf(context.Background(), sweep)
	require.NoError(e.t, err)
	out := map[string]results.PerfResult{}
	for _, r := range perf {
		_, dup := out[r.Identity]
		require.False(e.t, dup, "two perf rows for identity %s in %s", r.Identity, sweep)
		out[r.Identity] = r
	}
	return out
}

// deleteSweep removes a sweep's workflows (sweep and points) from Temporal,
// as history retention eventually does.
func (e *itEnv) deleteSweep(id string) {
	ctx := context.Background()
	ids := append(e.list(`SweepID = "`+id+`"`), id)
	for _, wid := range ids {
		_, err := e.c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid}})
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			require.NoError(e.t, err, wid)
		}
	}
	e.eventually("the first sweep's workflows to be gone", time.Minute, func() bool {
		_, err := e.c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		return errors.As(err, &nf) && len(e.list(`SweepID = "`+id+`"`)) == 0
	})
}

// TestIntegrationRerunGivesEachPointItsOwnFigures is issue 11's acceptance
// for reuse: a fixed-seq-len row whose three concurrencies share one
// deployment and one exp-name runs, its Temporal history is deleted, and a
// rerun (from the ledger alone) reuses every point's own figures. --force
// perf measures them again; a worker with another measurement profile
// reuses nothing and says why.
func TestIntegrationRerunGivesEachPointItsOwnFigures(t *testing.T) {
	e := newITEnv(t)
	stopWorker := e.startWorker()
	sweepFile := "testdata/fixed-sweep.yaml"

	// fixed-master.yaml runs the seed's c4 recipe up to conc 32 on purpose
	// (one small deployment, several points): waive that recipe-row finding.
	out, code := e.cli("sweep", "start", "--sweep", sweepFile, "--fast-retries", "--json", "--allow", "recipe-row")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
		Points  int    `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.Equal(t, 3, started.Points)
	first := started.SweepID
	pr := e.wait(first, 4*time.Minute)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	store := e.ledger()
	firstPerf := e.perfByIdentity(store, first)
	require.Len(t, firstPerf, 3)
	tputs := map[float64]bool{}
	for _, r := range firstPerf {
		assert.Equal(t, "dsv4_1k1k", r.ExpName, "every point of the row has InferenceX's exp-name")
		require.Greater(t, r.OutputTputPerGPU, 0.0)
		tputs[r.OutputTputPerGPU] = true
	}
	require.Len(t, tputs, 3, "three concurrencies, three different throughputs: %+v", firstPerf)

	// Temporal forgets the sweep; the ledger is all a rerun has.
	e.deleteSweep(first)

	out, code = e.cli("rerun", first, "--fast-retries", "--json")
	require.Equal(t, 0, code, out)
	rerun := first + "-rerun1"
	pr = e.wait(rerun, 3*time.Minute)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	rerunPerf := e.perfByIdentity(store, rerun)
	require.Len(t, rerunPerf, 3)
	for id, r := range rerunPerf {
		want, ok := firstPerf[id]
		require.True(t, ok, "identity %s", id)
		assert.Equal(t, want.OutputTputPerGPU, r.OutputTputPerGPU, "conc %d gets its own throughput back", r.Conc)
		assert.Equal(t, want.TTFTp90Ms, r.TTFTp90Ms, "conc %d TTFT p90", r.Conc)
		assert.Equal(t, want.Interactivity, r.Interactivity, "conc %d interactivity", r.Conc)
		assert.Equal(t, want.Conc, r.Conc)
		assert.Equal(t, first, r.SourceSweep, "the ledger records where reused figures came from")
	}
	for _, p := range pr.Points {
		perf, _ := e.activityRuns(p.WorkflowID, "Perf")
		assert.Zero(t, perf, "%s: reused, not measured", p.PointID)
	}
	outs, err := store.StageOutputs(context.Background(), rerun)
	require.NoError(t, err)
	for _, o := range outs {
		assert.Equal(t, first, o.SourceSweep, "%s %s", o.PointID, o.Stage)
		assert.NotEmpty(t, o.SourceRun, "the run that measured it")
	}

	// Status shows where each stage came from, in the table and as JSON.
	out, code = e.cli("status", rerun)
	require.Equal(t, 0, code, out)
	assert.Equal(t, 3, strings.Count(out, "perf reused from "+first), out)
	out, code = e.cli("status", rerun, "--json")
	require.Equal(t, 0, code, out)
	var v control.SweepView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	for _, p := range v.Points {
		require.Len(t, p.Reused, 1, p.PointID)
		assert.Equal(t, "perf", p.Reused[0].Stage)
		assert.Equal(t, first, p.Reused[0].Sweep)
	}

	// --force perf measures every point again.
	forced := first + "-forced"
	out, code = e.cli("rerun", first, "--force", "perf", "--id", forced, "--fast-retries", "--json")
	require.Equal(t, 0, code, out)
	pr = e.wait(forced, 4*time.Minute)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	forcedPerf := e.perfByIdentity(store, forced)
	tputs = map[float64]bool{}
	for _, r := range forcedPerf {
		assert.Empty(t, r.SourceSweep, "measured in this sweep")
		tputs[r.OutputTputPerGPU] = true
	}
	assert.Len(t, tputs, 3, "re-measured: three different throughputs again")
	for _, p := range pr.Points {
		perf, _ := e.activityRuns(p.WorkflowID, "Perf")
		assert.Equal(t, 1, perf, p.PointID)
	}

	// A worker with longer agentic perf runs still reuses these points:
	// fixed-seq-len perf sends a number of prompts, not a duration, so the
	// duration is not part of their profile.
	stopWorker()
	cfg := e.workerConfig()
	cfg.PerfDuration = 3 * time.Second
	stopWorker = e.startWorkerWith(e.c, cfg)
	longer := first + "-longer"
	out, code = e.cli("rerun", first, "--id", longer, "--fast-retries", "--json")
	require.Equal(t, 0, code, out)
	pr = e.wait(longer, 4*time.Minute)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	for _, p := range pr.Points {
		perf, _ := e.activityRuns(p.WorkflowID, "Perf")
		assert.Equal(t, 0, perf, "%s: a perf duration fixed-seq-len perf never uses blocks no reuse", p.PointID)
	}

	// A worker that measures differently (another engine clock) reuses
	// nothing and says why.
	stopWorker()
	cfg = e.workerConfig()
	cfg.SimTimeScale = 0.004
	e.startWorkerWith(e.c, cfg)
	other := first + "-profile"
	out, code = e.cli("rerun", first, "--id", other, "--fast-retries", "--json")
	require.Equal(t, 0, code, out)
	pr = e.wait(other, 4*time.Minute)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	for _, p := range pr.Points {
		perf, _ := e.activityRuns(p.WorkflowID, "Perf")
		assert.Equal(t, 1, perf, "%s: a different profile is never reused", p.PointID)
	}
	out, code = e.cli("status", other)
	require.Equal(t, 0, code, out)
	assert.Equal(t, 3, strings.Count(out, "perf not reused: measurement profile differs: "), out)
	assert.Contains(t, out, "time_scale 0.002 -> 0.004")
	assert.NotContains(t, out, "reused from")
}
