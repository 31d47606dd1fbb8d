package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly"
	"github.com/sweepflow/sweepflow/nightly/regress"
)

// aggSweepCopy writes the agg test sweep into a temp dir with its master
// config edited by edit, and extra appended to the sweep file.
func aggSweepCopy(t *testing.T, edit func(string) string, extra string) string {
	t.Helper()
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	master, err := os.ReadFile(filepath.Join(repo, "configs", "dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(edit(string(master))), 0o644))
	sweep := "name: dsv4-agg-test\nconfig-files: [master.yaml]\n" +
		"runner-config: " + filepath.Join(repo, "configs", "runners.yaml") + "\n" +
		"config-keys: [dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg]\n" +
		"cluster: " + filepath.Join(repo, "configs", "clusters", "local-sim.yaml") + "\n" +
		"recipes-root: " + filepath.Join(repo, "configs") + "\n" +
		"golden-al: " + filepath.Join(repo, "configs", "golden-al", "dsv4-pro-0813-dspark.yaml") + "\n" + extra
	path := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(path, []byte(sweep), 0o644))
	return path
}

func TestBaselineKeyIgnoresImageOnly(t *testing.T) {
	keep := func(s string) string { return s }
	newImage := func(s string) string {
		return strings.ReplaceAll(s, "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9", "lmsysorg/sglang:nightly-dev-20261129-0000000")
	}
	build := func(edit func(string) string) map[string][2]string {
		in, _, err := control.Build(control.Request{SweepFile: aggSweepCopy(t, edit, "")})
		require.NoError(t, err)
		require.Len(t, in.Points, 2)
		out := map[string][2]string{}
		for _, p := range in.Points {
			require.Regexp(t, `^[0-9a-f]{32}-c\d+$`, p.BaselineKey)
			out[p.ExpName] = [2]string{p.Identity, p.BaselineKey}
		}
		return out
	}
	base, img := build(keep), build(newImage)
	keys := map[string]bool{}
	for id, fk := range base {
		require.Contains(t, img, id)
		assert.NotEqual(t, fk[0], img[id][0], "%s: a new image is a new identity (no silent reuse)", id)
		assert.Equal(t, fk[1], img[id][1], "%s: but the same baseline key (nightly finds last night)", id)
		keys[fk[1]] = true
	}
	assert.Len(t, keys, 2, "the two concurrencies have their own baselines")

	// Anything else in the row changes the key: here the router version.
	router := build(func(s string) string { return strings.Replace(newImage(s), `"1.5.0.dev20260910"`, `"1.5.1"`, 1) })
	for id := range base {
		assert.NotEqual(t, base[id][1], router[id][1], "%s: a row change must change the baseline key", id)
	}
}

func TestNightlySchedule(t *testing.T) {
	custom := aggSweepCopy(t, func(s string) string { return s }, "regression:\n  ttft-p90-rise-pct: 25\n  interactivity-drop-pct: -1\n")
	base := scheduleFlags{cron: "0 2 * * *", tz: "Europe/Berlin", sweepFile: custom, catchup: time.Hour, pause: true,
		webhook: "https://hooks.example/T0/B0/secret", baseline: "pinned-sweep"}
	opts, nin, err := nightlySchedule("nightly", base)
	require.NoError(t, err)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, opts.Overlap)
	assert.Equal(t, time.Hour, opts.CatchupWindow)
	assert.True(t, opts.PauseOnFailure)
	assert.Equal(t, []string{"0 2 * * *"}, opts.Spec.CronExpressions)
	assert.Equal(t, "Europe/Berlin", opts.Spec.TimeZoneName)
	act := opts.Action.(*client.ScheduleWorkflowAction)
	assert.Equal(t, "nightly-dsv4-agg-test", act.ID)
	assert.Equal(t, "NightlyWorkflow", act.Workflow, "schedules and recorded histories name the workflow type")
	require.Len(t, act.Args, 1)
	got := act.Args[0].(nightly.Input)
	assert.Equal(t, *nin, got)
	assert.Equal(t, regress.Thresholds{OutputTputPerGPUDropPct: 5, TTFTp90RisePct: 25, InteractivityDropPct: -1}, got.Thresholds)
	assert.Equal(t, "pinned-sweep", got.Baseline)
	assert.Equal(t, "", got.Sweep.SweepID, "each night's sweep ID comes from its workflow ID")
	assert.True(t, got.Sweep.Nightly)
	assert.Len(t, got.Sweep.Points, 2)
	assert.Nil(t, got.Forecast, "no forecast unless asked: the nightly's commands stay as recorded")

	withForecast := base
	withForecast.forecast = true
	_, nin, err = nightlySchedule("nightly", withForecast)
	require.NoError(t, err)
	require.NotNil(t, nin.Forecast)
	assert.Equal(t, forecast.Profile{Name: "local-sim", Nodes: 18, GPUsPerNode: 4, BringUp: 20 * time.Minute}, nin.Forecast.Profile,
		"the sweep's cluster profile as the schedule is created")
	assert.Equal(t, forecast.DefaultAssumptions(), nin.Forecast.Assumptions)

	cases := []struct {
		name string
		edit func(*scheduleFlags)
		want string
	}{
		{"bad timezone", func(f *scheduleFlags) { f.tz = "Mars/Olympus" }, `--timezone "Mars/Olympus"`},
		{"webhook not http", func(f *scheduleFlags) { f.webhook = "ftp://x/y" }, "--webhook must be an http"},
		{"webhook without host", func(f *scheduleFlags) { f.webhook = "https:///path" }, "--webhook must be an http"},
		{"tiny catch-up window", func(f *scheduleFlags) { f.catchup = time.Second }, "--catchup-window"},
		{"missing sweep file", func(f *scheduleFlags) { f.sweepFile = "nope.yaml" }, "nope.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			_, _, err := nightlySchedule("nightly", f)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
