package nightly

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/internal/replaytest"
	"github.com/sweepflow/sweepflow/workflows"
)

// TestReplayRecordedHistories replays nightlies recorded on the real dev
// server (one that found regressions) under the workflow's registered name,
// so a change that would break running nightlies, or a rename of the
// workflow or its activities, fails here. Re-record with
// SWEEPFLOW_RECORD_HISTORIES=1 go test ./e2e -run TestIntegrationNightlyRegression
// only for changes made under the revision rule in the workflows package comment.
func TestReplayRecordedHistories(t *testing.T) {
	glob := filepath.Join("testdata", "histories", "nightly-*.json")
	files, _ := filepath.Glob(glob)
	for _, f := range files {
		// A nightly names its child sweep after its own workflow ID.
		require.FileExists(t, strings.TrimSuffix(f, ".json")+".wid")
	}
	replaytest.Files(t, glob, 1, func(r worker.WorkflowReplayer) {
		r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
		r.RegisterWorkflow(workflows.SweepWorkflow)
	})
}
