package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/workflows"
)

// A stage that retried by itself after heartbeat timeouts shows in the
// table's notes and in --json, with the error it met.
func TestStatusShowsAutoRetries(t *testing.T) {
	var pv pointView
	pv.PointID, pv.Status = "p-c64", workflows.StatusCompleted
	pv.fromState(&workflows.PointState{Stage: "upload", Stages: []workflows.StageRun{
		{Stage: "allocate", Outcome: "ok"},
		{Stage: "perf", Outcome: "ok", AutoRetries: 2, Error: "timeout: Heartbeat"},
	}})
	require.Equal(t, []autoRetryView{{Stage: "perf", Retries: 2, Error: "timeout: Heartbeat"}}, pv.AutoRetries)

	var buf bytes.Buffer
	printSweep(&buf, &sweepView{SweepID: "s", Points: []pointView{pv}})
	require.Contains(t, buf.String(), "p-c64: perf retried by itself 2x after timeout: Heartbeat")

	b, err := json.Marshal(pv)
	require.NoError(t, err)
	require.Contains(t, string(b), `"auto_retries":[{"stage":"perf","retries":2,"error":"timeout: Heartbeat"}]`)

	pv.fromState(&workflows.PointState{Stages: []workflows.StageRun{{Stage: "perf", Outcome: "ok"}}})
	require.Nil(t, pv.AutoRetries, "a refreshed state drops the old notes")
}
