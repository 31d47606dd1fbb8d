package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	seedSweep  = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	clFixture  = "testdata/changelog/perf-changelog.yaml"
	clBadEntry = "testdata/changelog/bad-entries.yaml"
)

// TestChangelogEntryPlansSeedSweep: the fixture's entry 1 names the seed
// keys by glob; the sweep it builds is the seed sweep, point for point and
// with the same sweep ID (so a start from either attaches to one run).
func TestChangelogEntryPlansSeedSweep(t *testing.T) {
	want, _, err := buildSweep(sweepRequest{SweepFile: seedSweep})
	require.NoError(t, err)
	got, p, err := buildSweep(sweepRequest{SweepFile: seedSweep, Changelog: &changelogRef{Path: clFixture, Entry: 1}})
	require.NoError(t, err)
	assert.Equal(t, want.SweepID, got.SweepID)
	require.Len(t, got.Points, 8)
	assert.Equal(t, want.Points, got.Points)
	assert.Equal(t, 4, p.Evals())
}

func TestChangelogFlagsShapeSweep(t *testing.T) {
	tests := []struct {
		name         string
		entry, since int
		points       int
		evals        int
		err          string
	}{
		{name: "no-evals agg entry", entry: 2, points: 2, evals: 0},
		{name: "evals-only entry", entry: 3, err: "perf-changelog.yaml:23: entry 3.evals-only: eval-only entries cannot start a sweep yet"},
		{name: "scenario filter selects nothing", entry: 4, err: "generate no rows"},
		{name: "since 1 includes the evals-only entry", since: 1, err: "entry 3.evals-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, p, err := buildSweep(sweepRequest{SweepFile: seedSweep, Changelog: &changelogRef{Path: clFixture, Entry: tt.entry, Since: tt.since}})
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, oneLine(err), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, in.Points, tt.points)
			assert.Equal(t, tt.evals, p.Evals())
		})
	}
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
			out: []string{`changelog testdata/changelog/bad-entries.yaml:8: entry 2.config-keys[0]: no config key matches the pattern "dsv4-fp4-gb300-*"`}},
		{name: "bad fields, one line each", args: []string{"--changelog", clBadEntry, "--entry", "3"}, code: 1,
			out: []string{"bad-entries.yaml:15: entry 3.description: expected a list", "bad-entries.yaml:16: entry 3.pr-link:",
				"bad-entries.yaml:17: entry 3.evals-only: expected true or false", "bad-entries.yaml:19: entry 3.scenario-type[0]: unknown scenario type", "4 failing"}},
		{name: "no-evals with all-evals", args: []string{"--changelog", clBadEntry, "--entry", "4"}, code: 1,
			out: []string{"bad-entries.yaml:26: entry 4.no-evals: no-evals cannot be combined"}},
		{name: "base: the added entries are checked", args: []string{"--changelog", clFixture, "--base", "testdata/changelog/base"}, code: 0,
			out: []string{"PASS: 8 rows"}},
		{name: "base: an edited line breaks the promise", args: []string{"--changelog", clBadEntry, "--base", "testdata/changelog/base"}, code: 1,
			out: []string{"changelog testdata/changelog/bad-entries.yaml:5: append-only: base line 5 "}},
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

func TestPlanChangelogDryRun(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: changelogRef{Path: clFixture, Entry: 1}}))
	assert.Contains(t, stdout.String(), "changelog entry 1 (testdata/changelog/perf-changelog.yaml:5)")
	assert.Contains(t, stdout.String(), "8 points, 76 node-allocations, 4 with eval")
}
