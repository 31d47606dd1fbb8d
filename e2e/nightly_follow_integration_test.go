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
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/nightly"
	"github.com/sweepflow/sweepflow/point"
)

// TestIntegrationNightlyFollowsConfigs creates a nightly schedule on the
// real dev server for a sweep whose master config lives in a scratch
// directory, then edits that master config between triggered nights:
//   - night 1 runs the configs as created;
//   - night 2 runs after the agg key's image was bumped: its points carry
//     the new image, are compared with night 1 (same identity apart from
//     the image) and the report names the image change;
//   - night 3 runs after the image was switched to a non-upstream build:
//     the check fails, the night says so and runs no point.
func TestIntegrationNightlyFollowsConfigs(t *testing.T) {
	e := newITEnv(t)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	master := filepath.Join(dir, "master.yaml")
	orig, err := os.ReadFile(filepath.Join(repo, "configs", "dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	const oldImage, newImage = "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9", "lmsysorg/sglang:nightly-dev-20261001-0a1b2c3d"
	require.Contains(t, string(orig), oldImage)
	require.NoError(t, os.WriteFile(master, orig, 0o644))
	sweep := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(sweep, []byte(strings.Join([]string{
		"name: dsv4-follow-test",
		"config-files: [" + master + "]",
		"runner-config: " + filepath.Join(repo, "configs", "runners.yaml"),
		"config-keys: [dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg]",
		"cluster: " + filepath.Join(repo, "configs", "clusters", "local-sim.yaml"),
		"recipes-root: " + filepath.Join(repo, "configs"),
		"golden-al: " + filepath.Join(repo, "configs", "golden-al", "dsv4-pro-0813-dspark.yaml"),
		"regression: {ttft-p90-rise-pct: -1, output-tput-per-gpu-drop-pct: -1, interactivity-drop-pct: -1}",
		"",
	}, "\n")), 0o644))

	out, code := e.cli("schedule", "create", "follow-it", "--sweep", sweep, "--fast-retries")
	require.Equal(t, 0, code, out)
	ctx := context.Background()
	require.NoError(t, e.c.ScheduleClient().GetHandle(ctx, "follow-it").Pause(ctx, client.SchedulePauseOptions{Note: "test: backfills only"}))

	night := func(day int) nightly.Result {
		stop := e.startWorkerWith(e.c, e.nightlyWorkerConfig())
		defer stop()
		at := time.Date(2025, 7, day, 2, 0, 0, 0, time.UTC)
		out, code := e.cli("schedule", "backfill", "follow-it", "--from", at.Add(-time.Hour).Format(time.RFC3339),
			"--to", at.Add(time.Hour).Format(time.RFC3339))
		require.Equal(t, 0, code, out)
		return e.waitNightly("follow-it-dsv4-follow-test-"+at.Format(time.RFC3339), 4*time.Minute)
	}
	edit := func(from, to string) {
		data, err := os.ReadFile(master)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(master, []byte(strings.Replace(string(data), from, to, 1)), 0o644))
	}

	res1 := night(1)
	assert.Equal(t, 2, res1.Summary.Counts[point.StatusCompleted], "%+v", res1.Summary)
	assert.Empty(t, res1.Summary.ImageChanges)

	edit(oldImage, newImage) // the agg key comes first in the file
	res2 := night(2)
	night1 := nightly.SweepID("follow-it-dsv4-follow-test-2025-07-01T02:00:00Z")
	assert.Equal(t, 2, res2.Summary.Counts[point.StatusCompleted], "%+v", res2.Summary)
	assert.Equal(t, 2, res2.Summary.Compared, "same identity apart from the image: night 1 is the baseline")
	require.Len(t, res2.Summary.ImageChanges, 2)
	for _, c := range res2.Summary.ImageChanges {
		assert.Equal(t, oldImage, c.From)
		assert.Equal(t, newImage, c.To)
		assert.Equal(t, night1, c.BaselineSweep)
		assert.Equal(t, "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg", c.ConfigKey)
	}
	rep, ok, err := e.ledger().GetRegressionReport(ctx, res2.Summary.SweepID)
	require.NoError(t, err)
	require.True(t, ok)
	var stored nightly.RegressionReport
	require.NoError(t, json.Unmarshal(rep.JSON, &stored))
	require.Len(t, stored.ImageChanges, 2, "the stored report names the image change")
	assert.Contains(t, stored.ImageChanges[0].String(), oldImage+" -> "+newImage)

	edit(newImage, "registry.example.com/sglang:patched") // not an upstream image
	res3 := night(3)
	require.NotEmpty(t, res3.Summary.CheckFailures)
	assert.True(t, strings.HasPrefix(res3.Summary.CheckFailures[0], "upstream-image "), res3.Summary.CheckFailures[0])
	assert.Zero(t, res3.Summary.Points)
	assert.Empty(t, res3.Summary.Counts)
	assert.Equal(t, []string{"follow-it-dsv4-follow-test-2025-07-03T02:00:00Z"}, e.list(`SweepflowKind = "nightly" AND PointStatus = "check-failed"`))
	assert.Empty(t, e.list(`SweepID = "`+res3.Summary.SweepID+`" AND SweepflowKind = "point"`), "no point ran")

	// The failed night is in the ledger with its findings, and its report
	// shows them.
	assert.NotEmpty(t, res3.Summary.ReportURI)
	sw3, found, err := e.ledger().GetSweep(ctx, res3.Summary.SweepID)
	require.NoError(t, err)
	require.True(t, found, "the check-failed night has a sweep row")
	assert.Equal(t, point.StatusCheckFailed, sw3.Status)
	assert.True(t, sw3.Nightly)
	rep3, ok, err := e.ledger().GetRegressionReport(ctx, res3.Summary.SweepID)
	require.NoError(t, err)
	require.True(t, ok, "the check-failed night has a report")
	var stored3 nightly.RegressionReport
	require.NoError(t, json.Unmarshal(rep3.JSON, &stored3))
	assert.Equal(t, res3.Summary.CheckFailures, stored3.CheckFailures)
	html := filepath.Join(dir, "night3.html")
	out, code = e.cli("report", "--sweep", res3.Summary.SweepID, "--out", html)
	require.Equal(t, 0, code, out)
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.Contains(t, string(page), `id="check-failed"`)
	assert.Contains(t, string(page), "registry.example.com/sglang:patched")
}
