package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// statusJSON runs `starter status ID --json`.
func (e *itEnv) statusJSON(id string) (*control.SweepView, bool) {
	out, code := e.cli("status", id, "--json")
	var v control.SweepView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		return nil, false
	}
	return &v, true
}

// pointOf is the row of point id in a status.
func pointOf(v *control.SweepView, id string) *control.PointView {
	for i := range v.Points {
		if v.Points[i].PointID == id {
			return &v.Points[i]
		}
	}
	return nil
}

// TestIntegrationSkipEndsIncomplete: an operator skip of Allocate,
// Checkpoint, Perf or Upload ends the point incomplete, not completed, and
// `starter status --json`, the status table and the PointStatus search
// attribute agree, naming the skipped stage.
func TestIntegrationSkipEndsIncomplete(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()

	id := "it-skip"
	skips := map[string]string{
		"dsv4_p1x8_d0x8_conc1_kvdram-hicache":                 "allocate",
		"dsv4_p1x8_d0x8_conc4_kvdram-hicache":                 "checkpoint",
		"dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache":  "perf",
		"dsv4_p1x8ep8dpa_d1x16ep16dpa_conc128_kvdram-hicache": "upload",
	}
	var keep, faults []string
	for pointWID, stage := range skips {
		keep = append(keep, pointWID)
		faults = append(faults, pointWID+":"+stage) // fails until an operator decides
	}
	in := e.sweep(id, keep, faults)
	e.start(in)

	// Skip every point that waits, until the sweep ends (they reach their
	// gates at different times; visibility may lag behind a decision).
	ctx := context.Background()
	e.eventually("the sweep to end after the skips", 4*time.Minute, func() bool {
		d, err := e.c.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return true
		}
		if len(e.list(fmt.Sprintf(`SweepID = %q AND PointStatus = %q`, id, point.StatusAwaitingOperator))) > 0 {
			_, _ = e.cli("skip", "--sweep", id, "--reason", "test")
		}
		return false
	})
	pr := e.wait(id, time.Minute)
	require.Equal(t, len(skips), pr.Counts[point.StatusIncomplete], "%+v", pr.Counts)
	require.Zero(t, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	v, ok := e.statusJSON(id)
	require.True(t, ok)
	for pointWID, stage := range skips {
		p := pointOf(v, simID(t, pointWID))
		require.NotNil(t, p, pointWID)
		require.Equal(t, point.StatusIncomplete, p.Status, pointWID)
		require.Equal(t, []string{stage}, p.Skipped, pointWID)
		require.NotEmpty(t, p.Missing, pointWID)
	}
	c128 := pointOf(v, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc128_kvdram-hicache"))
	require.Equal(t, []string{"upload"}, c128.Missing, "perf and eval ran; only the upload is missing")
	require.NotNil(t, c128.Perf)

	out, code := e.cli("status", id)
	require.Equal(t, 0, code, out)
	for _, stage := range skips {
		require.Contains(t, out, "incomplete (skipped "+stage+")")
	}

	// The Web UI's PointStatus says the same.
	var want []string
	for pointWID := range skips {
		want = append(want, workflows.PointWorkflowID(id, simID(t, pointWID)))
	}
	query := fmt.Sprintf(`SweepID = %q AND PointStatus = %q`, id, point.StatusIncomplete)
	e.eventually("PointStatus incomplete on every point", time.Minute, func() bool { return len(e.list(query)) == len(skips) })
	require.ElementsMatch(t, want, e.list(query))
	require.Empty(t, e.list(fmt.Sprintf(`SweepID = %q AND SweepflowKind = "point" AND PointStatus = "completed"`, id)))
}

// TestIntegrationNodesReleasedWhileWaiting: a point left waiting for an
// operator past the node hold tears its allocation down (status shows 0
// nodes for it); a retry allocates again, brings the server up again and
// completes the point. The history, with its versioned wait, replays.
func TestIntegrationNodesReleasedWhileWaiting(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()

	id := "it-release"
	name := "dsv4_p1x8_d0x8_conc4_kvdram-hicache"
	// Two failed perf attempts spend the stage's budget; the third succeeds.
	in := e.sweep(id, []string{name}, []string{name + ":perf:2"})
	in.Tuning.NodeHold = 2 * time.Second
	e.start(in)
	pointWID := workflows.PointWorkflowID(id, simID(t, name))

	var p *control.PointView
	e.eventually("the waiting point to release its nodes", 3*time.Minute, func() bool {
		v, ok := e.statusJSON(id)
		if !ok {
			return false
		}
		p = pointOf(v, simID(t, name))
		return p != nil && p.Status == point.StatusAwaitingOperator && p.Released
	})
	require.Equal(t, 0, p.NodesHeld)
	require.Equal(t, "perf", p.Stage)
	teardowns, _ := e.activityRuns(pointWID, "Teardown")
	require.Equal(t, 1, teardowns, "the release ran teardown")
	out, code := e.cli("status", id)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf(" 0/%d ", p.Nodes))
	require.Contains(t, out, "its nodes were released while it waited")

	// Too late to hold: the nodes are gone.
	out, code = e.cli("hold", pointWID)
	require.NotEqual(t, 0, code, out)

	out, code = e.cli("retry", pointWID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "accepted retry for perf")
	pr := e.wait(id, 3*time.Minute)
	require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	for typ, want := range map[string]int{"Allocate": 2, "BringUp": 2, "Warmup": 2, "Teardown": 2, "Upload": 1} {
		n, _ := e.activityRuns(pointWID, typ)
		require.Equal(t, want, n, "%s scheduled", typ)
	}
	_, attempts := e.activityRuns(pointWID, "Perf")
	require.Equal(t, 3, attempts, "2 failed attempts on the first nodes, 1 on the fresh ones")
	// Node-hours: the failed budget, then the hold until the release's
	// teardown (the node hold, 2 s), then nothing until the fresh allocation.
	cats := e.requireNodeHoursAddUp(id)
	require.Greater(t, cats["failed:injected"], 0.0, "%v", cats)
	require.Greater(t, cats["held-for-operator"], 0.0, "%v", cats)
	require.Less(t, cats["held-for-operator"]*60/float64(p.Nodes), 10.0, "held about the 2 s node hold, not the whole wait: %v", cats)

	// The new code path is deterministic: replay its history.
	hist := e.c.GetWorkflowHistory(context.Background(), pointWID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.PointWorkflow)
	var h historypb.History
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	require.NoError(t, r.ReplayWorkflowHistory(nil, &h))
}
