package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// The seed sweep file and control's perf-changelog fixture, whose entry 1
// selects the seed's config keys.
const (
	seedSweep = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	clFixture = "../control/testdata/changelog/perf-changelog.yaml"
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
	// The fixture sits outside this directory, so the entry names it by its
	// absolute path.
	assert.Regexp(t, `entry 1 \(/\S*/control/testdata/changelog/perf-changelog\.yaml:5\) https://github\.com/SemiAnalysisAI/InferenceX/pull/XXX: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-\*`, memo["entries"])

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

// TestIntegrationEvalOnlyChangelogSweep runs an all-evals changelog entry
// on the real dev server with the simulated partition: its points bring
// the server up in eval mode only, run GSM8K without any perf run, end
// completed, and the ledger, status and report show them as eval-only.
func TestIntegrationEvalOnlyChangelogSweep(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()
	const id = "it-eval-only"
	in, plan, err := control.Build(control.Request{
		SweepFile: seedSweep, ClusterFile: "../configs/clusters/local-sim.yaml", ID: id,
		Changelog: &control.ChangelogRef{Path: "../control/testdata/changelog/evals.yaml", Entry: 2},
		Tuning:    workflows.Tuning{RetryInterval: 200 * time.Millisecond, MaxAttempts: 2, HeartbeatTimeout: 5 * time.Second, OperatorTimeout: time.Hour},
	})
	require.NoError(t, err)
	require.Len(t, in.Points, 2)
	// As `starter sweep start` does: the report forecasts from this plan.
	require.NoError(t, control.RecordPlan(context.Background(), e.ledger(), in, plan))
	e.start(in)
	pr := e.wait(id, 5*time.Minute)
	require.Len(t, pr.Points, 2)
	for _, p := range pr.Points {
		assert.True(t, p.EvalOnly, p.PointID)
		require.NotNil(t, p.Outcome, p.PointID)
		assert.Contains(t, []string{point.StatusCompleted, point.StatusEvalFailed}, p.Status, "%s: %+v", p.PointID, p.Outcome)
		st := p.Outcome.State
		require.NotNil(t, st, p.PointID)
		assert.Nil(t, st.Perf, p.PointID)
		require.NotNil(t, st.Eval, p.PointID)
		assert.Empty(t, st.Missing, p.PointID)
		assert.Equal(t, map[string]int{"eval": 1}, e.bringUps(p.WorkflowID), "%s comes up in eval mode only", p.PointID)
		scheduled, _ := e.activityRuns(p.WorkflowID, "Perf")
		assert.Zero(t, scheduled, "%s runs no perf", p.PointID)
	}
	ctx := context.Background()
	store := e.ledger()
	perf, err := store.Perf(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, perf, "no throughput figure in the ledger")
	evals, err := store.Evals(ctx, id)
	require.NoError(t, err)
	assert.Len(t, evals, 2)

	out, code := e.cli("status", id)
	require.Equal(t, 0, code, out)
	assert.Equal(t, 2, strings.Count(out, "(eval-only)"), out)
	html := filepath.Join(t.TempDir(), "r.html")
	out, code = e.cli("report", "--sweep", id, "--out", html)
	require.Equal(t, 0, code, out)
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(page), "<b>eval-only</b>"))
	// The forecast of its stored plan: two eval-mode bring-ups (20 min,
	// local-sim's bring-up-time) and two 10-min evals, each on its own
	// allocation at once: 0:30 on the rack, against seconds simulated.
	assert.Regexp(t, `forecast vs actual: [0-9.]+ vs [0-9.]+ node-hours, makespan 0:30:00 vs 0:0[0-9]:[0-9]{2}`, out)
	assert.Contains(t, string(page), `<table id="forecast">`)
}
