package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/report"
)

// TestRecordCheckFailure: a night whose check failed is in the ledger as a
// nightly sweep with status check-failed and a report holding the
// findings, and `starter report` (report.Load + Render) shows them.
func TestRecordCheckFailure(t *testing.T) {
	a := newLedgerActs(t)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	ctx := context.Background()
	night := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	failures := []string{
		"upstream-image configs/dsv4-gb200-agentx.yaml:4: registry.example.com/sglang:patched (expected an upstream lmsysorg/sglang image)",
		"engine-patch configs/recipes/x.yaml:12: git apply fix.patch (expected no engine patches)",
	}
	req := CheckFailedNight{NightlyID: "nightly-x-2026-11-30T02:00:00Z", SweepID: "nightly-x-2026-11-30T02:00:00Z/sweep", Name: "dsv4",
		Night: night, Commit: "abc123", Failures: failures}
	for attempt := 0; attempt < 2; attempt++ { // idempotent: a retry rewrites the same rows
		v, err := env.ExecuteActivity(a.RecordCheckFailure, req)
		require.NoError(t, err)
		var rep RegressionReport
		require.NoError(t, v.Get(&rep))
		assert.NotEmpty(t, rep.ReportURI)
		assert.Equal(t, failures, rep.CheckFailures)
	}

	sw, found, err := a.Store.GetSweep(ctx, req.SweepID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, point.StatusCheckFailed, sw.Status)
	assert.True(t, sw.Nightly)
	assert.Equal(t, "dsv4", sw.Name)

	stored, ok, err := a.Store.GetRegressionReport(ctx, req.SweepID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, stored.Findings)
	var rep RegressionReport
	require.NoError(t, json.Unmarshal(stored.JSON, &rep))
	assert.Equal(t, failures, rep.CheckFailures)
	assert.Equal(t, "abc123", rep.SourceCommit)
	assert.Zero(t, rep.Points)

	in, err := report.Load(ctx, a.Store, req.SweepID, "")
	require.NoError(t, err)
	assert.Equal(t, failures, in.Current.CheckFailures)
	var html bytes.Buffer
	require.NoError(t, report.Render(&html, in))
	assert.Contains(t, html.String(), `id="check-failed"`)
	assert.Contains(t, html.String(), "failed with 2 findings; no point ran")
	assert.Contains(t, html.String(), "registry.example.com/sglang:patched")
}
