package workflows

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded on the real dev
// server (happy point, operator retry, abort, ledger reuse, a whole sweep).
// A change to the workflows that would break running sweeps fails here.
// Re-record with SWEEPFLOW_RECORD_HISTORIES=1 go test ./starter -run TestIntegrationOperatorGateAndRerun
// only for intended, versioned changes.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 5, "recorded histories are missing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(SweepWorkflow)
			r.RegisterWorkflow(PointWorkflow)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

func TestReplayDetectsReorderedStages(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "histories", "point-happy.json"))
	require.NoError(t, err)
	// A history whose first activity is not Allocate cannot come from this
	// code: the replayer must refuse it.
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	require.NoError(t, os.WriteFile(tampered, replaceFirst(data, []byte(`"Allocate"`), []byte(`"Warmup"`)), 0o644))
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(PointWorkflow)
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(nil, tampered))
}

func replaceFirst(b, old, new []byte) []byte { return bytes.Replace(b, old, new, 1) }
