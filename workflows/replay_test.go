package workflows

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
)

// TestReplayRecordedHistories replays histories recorded on the real dev
// server by the end-to-end tests (e2e) (happy point, operator retry,
// abort, ledger reuse, a vLLM point with eval on the emulated Slurm
// partition, a whole sweep with the operator gate; package nightly replays
// its own). A change to the workflows that would break running sweeps fails
// here. Re-record (SWEEPFLOW_RECORD_HISTORIES=1 go test ./e2e -run
// 'TestIntegrationOperatorGateAndRerun|TestSlurmBackendsSweep') only for
// changes made under the revision rule in the package comment.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 5, "recorded histories are missing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(SweepWorkflow)
			r.RegisterWorkflow(PointWorkflow)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			hist, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
			require.NoError(t, err)
			// The recorded workflow ID (children and activities derive theirs from it).
			var opts worker.ReplayWorkflowHistoryOptions
			if wid, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".wid"); err == nil {
				opts.OriginalExecution = workflow.Execution{ID: string(wid)}
			}
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, hist, opts))
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
