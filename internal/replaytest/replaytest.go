// Package replaytest replays workflow histories recorded by the end-to-end
// tests, so every workflow package checks its recordings the same way.
package replaytest

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

// Files replays each history matching glob (at least min of them) on a
// replayer that register sets up. A history's original workflow ID, which
// children and activities derive theirs from, is read from the .wid file
// beside it when there is one.
func Files(t *testing.T, glob string, min int, register func(worker.WorkflowReplayer)) {
	t.Helper()
	files, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), min, "recorded histories are missing (%s)", glob)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			register(r)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			hist, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
			require.NoError(t, err)
			var opts worker.ReplayWorkflowHistoryOptions
			if wid, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".wid"); err == nil {
				opts.OriginalExecution = workflow.Execution{ID: string(wid)}
			}
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, hist, opts))
		})
	}
}
