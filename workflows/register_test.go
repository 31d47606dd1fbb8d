package workflows

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/replaytest"
	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded on the real dev
// server by the end-to-end tests (e2e) (happy point, operator retry,
// abort, ledger reuse, a vLLM point with eval on the emulated Slurm
// partition, a whole sweep with the operator gate, a canary sweep whose vLLM
// canary failed, a point whose worker was killed mid-perf and whose new
// worker replayed it, a sweep with adaptive fill points and its deployment,
// whose worker was killed during an added point, the seed's 2P1D deployment
// with its three points on one shared bring-up and its c1024 point that took
// the server over; package nightly replays its own). A change to the
// workflows that would break running sweeps fails here. Re-record
// (SWEEPFLOW_RECORD_HISTORIES=1 go test ./e2e -run
// 'TestIntegrationOperatorGateAndRerun|TestSlurmBackendsSweep|TestIntegrationCanary|TestIntegrationEveryAttemptOnTheBooks|TestIntegrationAdaptiveWorkerKilled|TestIntegrationSeedSweepSharesBringUps')
// only for changes made under the revision rule in the package comment.
func TestReplayRecordedHistories(t *testing.T) {
	replaytest.Files(t, filepath.Join("testdata", "histories", "*.json"), 11, func(r worker.WorkflowReplayer) { Register(r) })
}

// TestReplayCoversTheSharedBringUp: the recorded 2P1D deployment starts its
// three points as children, one after the other, and the c1024 point takes
// the server over (a probe, no allocation or bring-up of its own), so a change
// to DeploymentWorkflow or to a point's shared path fails the replay above.
func TestReplayCoversTheSharedBringUp(t *testing.T) {
	dep, err := os.ReadFile(filepath.Join("testdata", "histories", "deployment-shared.json"))
	require.NoError(t, err)
	require.Regexp(t, `"workflowType": \{\s*"name": "DeploymentWorkflow"`, string(dep))
	require.Equal(t, 3, bytes.Count(dep, []byte("EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED")))
	pt, err := os.ReadFile(filepath.Join("testdata", "histories", "point-shared.json"))
	require.NoError(t, err)
	require.Regexp(t, `"activityType": \{\s*"name": "CheckServer"`, string(pt))
	require.NotRegexp(t, `"activityType": \{\s*"name": "(Allocate|BringUp)"`, string(pt), "the c1024 point took the server over")
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
