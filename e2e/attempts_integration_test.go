package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// TestIntegrationEveryAttemptOnTheBooks is issue 35's scenario on the real
// dev server: two seed points with --fast-retries, the c64 point's perf
// failing twice on purpose (--inject-fault c64:perf:2, inside one retry
// budget: the retry policy retries them), and the worker SIGKILLed inside
// the third perf attempt once it reported progress (the c4 point is done
// by then, so it is the only attempt in flight). A new worker process takes
// over and replays the point workflows; the heartbeat timeout ends the
// budget and the point retries perf by itself. The ledger then holds
// exactly three failed attempts, the two injected ones and the interrupted
// one as lost-worker with the dead worker's identity and its last progress,
// and one row per attempt Temporal's history started; `starter stats`
// lists both classes with their node-minutes, and its categories add up to
// the total and to the allocations in history.
func TestIntegrationEveryAttemptOnTheBooks(t *testing.T) {
	e := newITEnv(t)
	first := e.startWorkerProcess("worker1.log")

	id := "it-attempts"
	in := e.sweep(id, []string{"conc4_", "conc64_"}, []string{"conc64_:perf:2"})
	in.Tuning = control.FastTuning() // --fast-retries
	e.start(in)
	c4 := workflows.PointWorkflowID(id, simID(t, "dsv4_p1x8_d0x8_conc4_kvdram-hicache"))
	c64 := workflows.PointWorkflowID(id, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"))
	closed := func(wid string) bool {
		d, err := e.c.DescribeWorkflowExecution(context.Background(), wid, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	e.eventually("the c64 point's third perf attempt to report progress after the c4 point closed", 4*time.Minute, func() bool {
		return closed(c4) && activityBeating(e.c, c64, "Perf")
	})
	time.Sleep(500 * time.Millisecond) // the ledger write of that progress runs beside the beat
	t0 := time.Now()
	require.NoError(t, first.Process.Kill()) // SIGKILL, inside the perf attempt
	_, _ = first.Process.Wait()
	deadPID := first.Process.Pid
	e.startWorkerProcess("worker2.log")

	pr := e.wait(id, 4*time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	t.Logf("killed the worker inside the third perf attempt; the sweep completed %s later", time.Since(t0).Round(time.Second))

	store := e.ledger()
	ctx := context.Background()
	atts, err := store.Attempts(ctx, id)
	require.NoError(t, err)
	var failed []results.StageAttempt
	for _, a := range atts {
		assert.NotEqual(t, results.AttemptRunning, a.Outcome, "every attempt ended: %+v", a)
		if a.Failed() {
			failed = append(failed, a)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].StartedAt.Before(failed[j].StartedAt) })
	require.Len(t, failed, 3, "exactly the two injected attempts and the interrupted one: %+v", failed)
	c64ID := simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache")
	for i, f := range failed[:2] {
		assert.Equal(t, c64ID, f.PointID)
		assert.Equal(t, point.StagePerf, f.Stage)
		assert.Equal(t, i+1, f.Attempt, "attempts of one retry budget")
		assert.Equal(t, results.AttemptFailed, f.Outcome)
		assert.Equal(t, failure.Injected, f.Class)
		assert.Equal(t, string(failure.ErrInjectedFault), f.ErrorType)
		assert.Equal(t, fmt.Sprintf("injected fault in perf (%d of 2)", i+1), f.Message)
	}
	lost := failed[2]
	assert.Equal(t, c64ID, lost.PointID)
	assert.Equal(t, point.StagePerf, lost.Stage)
	assert.Equal(t, 3, lost.Attempt, "the budget's last attempt, on the killed worker")
	assert.Equal(t, results.AttemptLost, lost.Outcome)
	assert.Equal(t, failure.LostWorker, lost.Class)
	assert.True(t, strings.HasPrefix(lost.Worker, fmt.Sprintf("%d@", deadPID)), "the dead worker's identity: %q (pid %d)", lost.Worker, deadPID)
	assert.True(t, lost.EndedAt.After(lost.StartedAt))
	assert.Contains(t, lost.Heartbeat, `"phase":"perf"`, "the progress the dead attempt reported")
	t.Logf("lost attempt: %s attempt %d on %s, %s; heartbeat %s", lost.Stage, lost.Attempt, lost.Worker, lost.Message, lost.Heartbeat)

	// One row per attempt that Temporal started, per stage: the retries
	// and the attempt on the dead worker included, none twice after the
	// restart and the workflows' replay.
	for _, wid := range []string{c4, c64} {
		rows := map[string]int{}
		for _, a := range atts {
			if a.WorkflowID == wid {
				rows[a.Stage]++
			}
		}
		for typ, stage := range activities.StageActivities {
			_, started := e.activityRuns(wid, typ)
			assert.Equal(t, started, rows[stage], "%s: %s attempts in history and in the ledger", wid, stage)
		}
	}

	// starter stats: both classes with their node-minutes; the categories
	// add up to the total (within 1 %) and to history's allocations.
	cats := e.requireNodeHoursAddUp(id)
	out, code := e.cli("stats", "--sweep", id, "--json")
	require.Equal(t, 0, code, out)
	var stats struct {
		Total   float64            `json:"total_node_minutes"`
		Cats    map[string]float64 `json:"categories"`
		Useful  float64            `json:"useful_node_minutes"`
		Classes []struct {
			Class       string  `json:"class"`
			Attempts    int     `json:"attempts"`
			NodeMinutes float64 `json:"node_minutes"`
		} `json:"failure_classes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &stats), out)
	got := map[string][2]float64{}
	for _, c := range stats.Classes {
		got[c.Class] = [2]float64{float64(c.Attempts), c.NodeMinutes}
	}
	require.Len(t, got, 2, out)
	assert.Equal(t, 2.0, got["injected"][0], out)
	assert.Greater(t, got["injected"][1], 0.0, "the injected attempts' node-minutes: %s", out)
	assert.Equal(t, 1.0, got["lost-worker"][0], out)
	assert.Greater(t, got["lost-worker"][1], 0.0, "the lost attempt's node-minutes: %s", out)
	assert.Equal(t, got["injected"][1], cats["failed:injected"])
	sum := 0.0
	for _, v := range stats.Cats {
		sum += v
	}
	assert.Less(t, math.Abs(sum-stats.Total), 0.01*stats.Total, "categories add up to the total: %s", out)
	assert.Less(t, stats.Useful, cats["perf"]+cats["eval"]+1e-9, out)
	t.Logf("stats: total %.3f node-min, injected %.3f, lost-worker %.3f, perf %.3f, eval %.3f", stats.Total,
		got["injected"][1], got["lost-worker"][1], cats["perf"], cats["eval"])

	e.recordHistories(map[string]string{"point-worker-lost.json": c64})
}
