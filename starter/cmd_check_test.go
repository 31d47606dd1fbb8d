package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/results"
)

const fixtures = "../inferencex/checklist/testdata/"

func fixtureArgs(rule string) []string {
	return []string{"check", "--config-files", fixtures + rule + "/master.yaml", "--config-keys", "orca2*",
		"--runner-config", fixtures + "shared/runners.yaml", "--recipes-root", fixtures + rule,
		"--golden-al", fixtures + "shared/golden", "--models", fixtures + "shared/models.md", "--today", "2026-12-01"}
}

func TestCheckCommand(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{name: "seed sweep passes", args: []string{"check", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml"}, code: 0,
			stdout: []string{"PASS: 8 rows, 6 recipes", "0 failing"}},
		{name: "ok fixture", args: fixtureArgs("ok"), code: 0, stdout: []string{"PASS: 3 rows, 2 recipes, 9 rules run"}},
		{name: "failing fixture", args: fixtureArgs("upstream-image"), code: 1,
			stdout: []string{"inferencex/checklist/testdata/upstream-image/master.yaml:3: orca2-fp8-gb200-dynamo-sglang-agentic-mtp.image: got ghcr.io#acme/sglang-fork", "FAIL:"},
			stderr: "1 failing finding(s)"},
		{name: "allowed", args: append(fixtureArgs("upstream-image"), "--allow", "upstream-image"), code: 0,
			stdout: []string{"(allowed)", "PASS:", "1 allowed"}},
		{name: "append-only", args: append(fixtureArgs("append-only"), "--base", fixtures+"append-only/base"), code: 1,
			stdout: []string{"append-only ", "removed or changed"}},
		{name: "unknown rule", args: append(fixtureArgs("ok"), "--allow", "nope"), code: 2, stderr: `--allow "nope": unknown rule`},
		{name: "no input", args: []string{"check"}, code: 2, stderr: "give --sweep FILE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runIO(tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			for _, s := range tc.stdout {
				assert.Contains(t, stdout.String(), s)
			}
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

func TestCheckJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runIO(append(fixtureArgs("agentic-golden-al"), "--json"), &stdout, &stderr)
	require.Equal(t, 1, code, stderr.String())
	var out struct {
		Findings []checklist.Finding `json:"findings"`
		Failures int                 `json:"failures"`
		Pass     bool                `json:"pass"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Len(t, out.Findings, 1)
	f := out.Findings[0]
	assert.Equal(t, checklist.RuleAgenticGoldenAL, f.Rule)
	assert.True(t, strings.HasSuffix(f.Pos.File, "inferencex/checklist/testdata/agentic-golden-al/recipes/agg-tp8-c4-mtp.yaml"), f.Pos.File)
	assert.Positive(t, f.Pos.Line)
	assert.Contains(t, f.Got, "2.6")
	assert.Contains(t, f.Want, "SGLANG_SIMULATE_ACC_LEN=2.4")
	assert.Equal(t, 1, out.Failures)
	assert.False(t, out.Pass)
}

func TestSweepStartRefusesFailingCheck(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runIO([]string{"sweep", "start", "--sweep", "testdata/check/bad-sweep.yaml"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "refusing to start: 1 check failure(s), first: upstream-image ")
	assert.Contains(t, stderr.String(), "--allow RULE")
}

func TestSweepStartReviewMemo(t *testing.T) {
	rep, err := reviewSweep("testdata/check/bad-sweep.yaml", "", "", nil, []string{checklist.RuleUpstreamImage}, nil)
	require.NoError(t, err)
	assert.Zero(t, rep.Failures())
	memo := control.ReviewMemo(rep, []string{checklist.RuleUpstreamImage})
	rv := memo["review"].(map[string]any)
	assert.Equal(t, []string{checklist.RuleUpstreamImage}, rv["allowed"])
	waived := rv["waived"].([]string)
	require.Len(t, waived, 1)
	assert.True(t, strings.HasPrefix(waived[0], "upstream-image "), waived[0])
	_, err = json.Marshal(memo) // Temporal encodes memos as JSON payloads
	require.NoError(t, err)
}

// With a ledger whose bring-ups of one seed deployment took 3.5 h, the 4 h
// health_check budget is below p90 + margin: `starter check` warns, naming
// the recipe line and the figures, and still passes.
func TestCheckWarnsOnTightHealthBudget(t *testing.T) {
	const sweepFile = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	_, p, err := control.Build(control.Request{SweepFile: sweepFile})
	require.NoError(t, err)
	pt := p.Points[0]
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "results.db")
	store, err := results.Open(ctx, dsn)
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	for i, m := range []int{200, 210, 190} {
		sweep := fmt.Sprintf("old-%d", i)
		require.NoError(t, store.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: pt.ID, Identity: pt.Identity, Status: "completed"}))
		require.NoError(t, store.PutStageRuns(ctx, sweep, pt.ID, []results.StageRun{
			{Stage: "bringup", Outcome: "ok", Rounds: 1, StartedAt: t0, EndedAt: t0.Add(time.Duration(m) * time.Minute)}}))
	}
	require.NoError(t, store.Close())

	var stdout, stderr bytes.Buffer
	code := runIO([]string{"check", "--sweep", sweepFile, "--results", dsn}, &stdout, &stderr)
	require.Equal(t, 0, code, "a warning does not fail the check: %s", stderr.String())
	line := fmt.Sprintf("%s:%d", pt.Recipe.HealthCheck.Pos.File, pt.Recipe.HealthCheck.Pos.Line)
	assert.Contains(t, stdout.String(), "warning: health-budget "+line+": health_check budget 4h0m0s is below the observed bring-up p90 3h30m0s + margin 52m30s over 3 run(s)")
	assert.Contains(t, stdout.String(), "want >= 4h22m30s")
	assert.Equal(t, 1, strings.Count(stdout.String(), "warning: health-budget"), "only the deployment the ledger knows")

	stdout.Reset()
	code = runIO([]string{"check", "--sweep", sweepFile, "--results", dsn, "--json"}, &stdout, &stderr)
	require.Equal(t, 0, code)
	var out struct {
		Warnings []struct {
			Deployment string `json:"deployment"`
			P90        int64  `json:"p90_ns"`
		} `json:"health_budget_warnings"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
	require.Len(t, out.Warnings, 1)
	assert.Equal(t, pt.DeploymentHash, out.Warnings[0].Deployment)
	assert.Equal(t, int64(210*time.Minute), out.Warnings[0].P90)
}

func TestCheckChangelog(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  []string
	}{
		{name: "seed entry passes", args: []string{"--changelog", clFixture, "--entry", "1"}, code: 0,
			out: []string{"PASS: 8 rows", "(changelog, upstream-image"}},
		{name: "unmatched glob", args: []string{"--changelog", clBadEntry, "--entry", "2"}, code: 1,
			out: []string{`control/testdata/changelog/bad-entries.yaml:8: entry 2.config-keys[0]: no config key matches the pattern "dsv4-fp4-gb300-*"`}},
		{name: "bad fields, one line each", args: []string{"--changelog", clBadEntry, "--entry", "3"}, code: 1,
			out: []string{"bad-entries.yaml:15: entry 3.description: expected a list", "bad-entries.yaml:16: entry 3.pr-link:",
				"bad-entries.yaml:17: entry 3.evals-only: expected true or false", "bad-entries.yaml:19: entry 3.scenario-type[0]: unknown scenario type", "4 failing"}},
		{name: "no-evals with all-evals", args: []string{"--changelog", clBadEntry, "--entry", "4"}, code: 1,
			out: []string{"bad-entries.yaml:26: entry 4.no-evals: no-evals cannot be combined"}},
		{name: "base: the added entries are checked", args: []string{"--changelog", clFixture, "--base", "../control/testdata/changelog/base"}, code: 0,
			out: []string{"PASS: 8 rows"}},
		{name: "base: an edited line breaks the promise", args: []string{"--changelog", clBadEntry, "--base", "../control/testdata/changelog/base"}, code: 1,
			out: []string{"control/testdata/changelog/bad-entries.yaml:5: append-only: base line 5 "}},
		{name: "entry needs changelog", args: []string{"--entry", "1"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"check", "--sweep", seedSweep}, tt.args...)
			code := runIO(args, &stdout, &stderr)
			assert.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			for _, o := range tt.out {
				assert.Contains(t, stdout.String(), o)
			}
		})
	}
}
