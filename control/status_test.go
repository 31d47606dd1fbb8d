package control

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// A stage that retried by itself after heartbeat timeouts shows in the
// table's notes and in --json, with the error it met.
func TestStatusShowsAutoRetries(t *testing.T) {
	var pv PointView
	pv.PointID, pv.Status = "p-c64", point.StatusCompleted
	pv.fromState(&workflows.PointState{Stage: "upload", Stages: []workflows.StageRun{
		{Stage: "allocate", Outcome: "ok"},
		{Stage: "perf", Outcome: "ok", AutoRetries: 2, Error: "timeout: Heartbeat"},
	}})
	require.Equal(t, []AutoRetryView{{Stage: "perf", Retries: 2, Error: "timeout: Heartbeat"}}, pv.AutoRetries)

	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	require.Contains(t, buf.String(), "p-c64: perf retried by itself 2x after timeout: Heartbeat")

	b, err := json.Marshal(pv)
	require.NoError(t, err)
	require.Contains(t, string(b), `"auto_retries":[{"stage":"perf","retries":2,"error":"timeout: Heartbeat"}]`)

	pv.fromState(&workflows.PointState{Stages: []workflows.StageRun{{Stage: "perf", Outcome: "ok"}}})
	require.Nil(t, pv.AutoRetries, "a refreshed state drops the old notes")
}

// The gate's note on nodes matches what the point holds: no hold advice
// for a point that failed before (or after) its allocation.
func TestStatusGateNodesNote(t *testing.T) {
	tests := []struct {
		name string
		pv   PointView
		want string
	}{
		{"holds nodes", PointView{NodesHeld: 16}, "its 16 nodes are released after the node hold; starter hold s/p keeps them"},
		{"holds none", PointView{}, "it holds no nodes"},
		{"released", PointView{Released: true}, "its nodes were released while it waited"},
		{"on hold", PointView{NodesHeld: 2, Hold: true}, "holding its 2 nodes for debugging"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := tc.pv
			pv.PointID, pv.WorkflowID, pv.Status, pv.Stage, pv.LastError = "p", "s/p", point.StatusAwaitingOperator, "allocate", "x"
			var buf bytes.Buffer
			Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
			require.Contains(t, buf.String(), tc.want)
			if tc.pv.NodesHeld == 0 {
				require.NotContains(t, buf.String(), "starter hold")
			}
		})
	}
}

// A point whose final status the ledger could not record says so.
func TestStatusShowsRecordError(t *testing.T) {
	var pv PointView
	pv.PointID, pv.Status = "p-c64", point.StatusCompleted
	pv.fromState(&workflows.PointState{Stage: "done", RecordError: "database is locked"})
	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	require.Contains(t, buf.String(), "! p-c64: the ledger still shows an older status: recording it failed: database is locked")
}
