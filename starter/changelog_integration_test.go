package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// TestIntegrationChangelogStartsSeedSweep starts the seed sweep (on the
// simulated partition) from our changelog fixture's seed entry on the real
// dev server: the sweep workflow holds the seed's 8 points, its memo names
// the entry, and a start from the sweep file attaches to the same run.
func TestIntegrationChangelogStartsSeedSweep(t *testing.T) {
	e := newITEnv(t)
	const cluster = "../configs/clusters/local-sim.yaml"
	out, code := e.cli("sweep", "start", "--sweep", seedSweep, "--cluster", cluster, "--changelog", clFixture, "--entry", "1", "--json")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
		RunID   string `json:"run_id"`
		Points  int    `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	assert.Equal(t, 8, started.Points)

	ctx := context.Background()
	desc, err := e.c.DescribeWorkflowExecution(ctx, started.SweepID, "")
	require.NoError(t, err)
	f := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["changelog"]
	require.NotNil(t, f, "the memo records the changelog entries")
	var memo map[string]any
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(f, &memo))
	assert.Contains(t, memo["entries"], "entry 1 (testdata/changelog/perf-changelog.yaml:5) https://github.com/SemiAnalysisAI/InferenceX/pull/XXX: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-*")

	out, code = e.cli("sweep", "start", "--sweep", seedSweep, "--cluster", cluster, "--json")
	require.Equal(t, 0, code, out)
	var again struct {
		SweepID string `json:"sweep_id"`
		RunID   string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &again))
	assert.Equal(t, started.SweepID, again.SweepID, "the seed sweep file plans the same sweep")
	assert.Equal(t, started.RunID, again.RunID)
	require.NoError(t, e.c.TerminateWorkflow(ctx, started.SweepID, "", "test done"))
}
