package nightly

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/workflows"
)

// TestReplayRecordedHistories replays nightlies recorded on the real dev
// server (one that found regressions) under the workflow's registered name,
// so a change that would break running nightlies, or a rename of the
// workflow or its activities, fails here. Re-record with
// SWEEPFLOW_RECORD_HISTORIES=1 go test ./e2e -run TestIntegrationNightlyRegression
// only for changes made under the revision rule in the workflows package comment.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "nightly-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "recorded histories are missing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
			r.RegisterWorkflow(workflows.SweepWorkflow)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			hist, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
			require.NoError(t, err)
			// A nightly names its child sweep after its own workflow ID.
			wid, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".wid")
			require.NoError(t, err)
			opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: string(wid)}}
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, hist, opts))
		})
	}
}
