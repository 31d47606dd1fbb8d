package main

import (
	"bytes"
	"encoding/json"
	"slices"
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
		evalOnly     int
		err          string
	}{
		{name: "no-evals agg entry", entry: 2, points: 2, evals: 0},
		// InferenceX's eval selection of the disagg key: one row per
		// parallelism key at its highest conc >= 16, each an eval-only point.
		{name: "evals-only entry", entry: 3, points: 4, evals: 4, evalOnly: 4},
		{name: "scenario filter selects nothing", entry: 4, err: "generate no rows"},
		// Entry 1 claims the disagg key for throughput first: its evals
		// ride on the perf points and nothing is eval-only.
		{name: "since 1 includes the evals-only entry", since: 1, points: 8, evals: 4},
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
			assert.Equal(t, tt.evalOnly, p.EvalOnlyPoints())
			for i, pt := range p.Points {
				spec := in.Points[i]
				assert.Equal(t, pt.EvalOnly, spec.Profile.EvalOnly, pt.ID)
				if pt.EvalOnly {
					assert.True(t, spec.Eval, "an eval-only point evals: %s", pt.ID)
					assert.Zero(t, spec.SyntheticAL, "eval-only points run real draft verification: %s", pt.ID)
					assert.Contains(t, string(pt.Row), `"eval-only":true`)
				}
			}
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
	assert.Contains(t, stdout.String(), "8 points, 44 node-allocations, 4 with eval")
}

// TestChangelogEvalOnlyPoints: evals-only and all-evals entries plan
// eval-only points whose identities, baselines and profiles never meet a
// perf point's, so the ledger keeps them apart.
func TestChangelogEvalOnlyPoints(t *testing.T) {
	const clEvals = "testdata/changelog/evals.yaml"
	perf, pp, err := buildSweep(sweepRequest{SweepFile: seedSweep})
	require.NoError(t, err)
	tests := []struct {
		name         string
		entry, since int
		concs        []int
	}{
		{name: "evals-only: the eval selection", entry: 1, concs: []int{64, 128, 256, 1280}},
		{name: "all-evals: every row", entry: 2, concs: []int{1, 4}},
		{name: "both", since: 1, concs: []int{64, 128, 256, 1280, 1, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, p, err := buildSweep(sweepRequest{SweepFile: seedSweep, Changelog: &changelogRef{Path: clEvals, Entry: tt.entry, Since: tt.since}})
			require.NoError(t, err)
			require.Len(t, p.Points, len(tt.concs))
			assert.NotEqual(t, perf.SweepID, in.SweepID)
			assert.Zero(t, p.EvalRestarts(), "eval-only deployments come up in eval mode")
			for i, pt := range p.Points {
				assert.Equal(t, tt.concs[i], pt.Conc)
				assert.True(t, pt.EvalOnly && pt.Eval && in.Points[i].Eval && in.Points[i].Profile.EvalOnly, pt.ID)
				for _, q := range pp.Points {
					assert.NotEqual(t, q.Identity, pt.Identity)
					assert.NotEqual(t, q.BaselineKey, pt.BaselineKey)
					assert.NotEqual(t, q.ProfileHash, pt.ProfileHash)
				}
			}
		})
	}

	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: changelogRef{Path: clEvals, Entry: 1}}))
	assert.Contains(t, stdout.String(), "eval-only  B1")
	assert.Contains(t, stdout.String(), "4 eval-only points")
}

// TestPlanChangelogIXJSON: --changelog with --format ix-json prints the
// entries' matrix in InferenceX's changelog buckets; the seed entry's
// buckets hold exactly the generator's --no-evals and --evals-only rows of
// the seed keys, and an evals-only entry adds no throughput row.
func TestPlanChangelogIXJSON(t *testing.T) {
	type bucketed struct {
		MultiNode         map[string][]json.RawMessage `json:"multi_node"`
		SingleNode        map[string][]json.RawMessage `json:"single_node"`
		MultinodeAgentic  []json.RawMessage            `json:"multinode_agentic_evals"`
		Evals             []json.RawMessage            `json:"evals"`
		ChangelogMetadata struct {
			Entries []map[string]any `json:"entries"`
		} `json:"changelog_metadata"`
	}
	plan := func(f *planFlags) []byte {
		var out bytes.Buffer
		require.NoError(t, runPlanTo(&out, f))
		return out.Bytes()
	}
	var got bucketed
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: changelogRef{Path: clFixture, Entry: 1}}), &got))
	var tput, evals []json.RawMessage
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", noEvals: true}), &tput))
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", evalsOnly: true}), &evals))
	require.Len(t, tput, 8)
	require.Len(t, evals, 4)
	assert.Equal(t, canon(t, tput), canon(t, got.MultiNode["agentic"]))
	assert.Equal(t, canon(t, evals), canon(t, got.MultinodeAgentic))
	assert.Empty(t, got.SingleNode)
	assert.Empty(t, got.Evals)
	require.Len(t, got.ChangelogMetadata.Entries, 1)
	assert.Equal(t, "https://github.com/SemiAnalysisAI/InferenceX/pull/XXX", got.ChangelogMetadata.Entries[0]["pr-link"])

	var eo bucketed
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: changelogRef{Path: clFixture, Entry: 3}}), &eo))
	assert.Empty(t, eo.MultiNode, "evals-only: no throughput rows")
	assert.Len(t, eo.MultinodeAgentic, 4)
	assert.Equal(t, true, eo.ChangelogMetadata.Entries[0]["evals-only"])

	var stdout, stderr bytes.Buffer
	code := runIO([]string{"plan", "--sweep", seedSweep, "--format", "ix-json", "--changelog", clFixture, "--no-evals"}, &stdout, &stderr)
	assert.Equal(t, 2, code, "the entries say which evals run")
}

// canon is rows as sorted canonical JSON, so two row lists compare
// whatever their order.
func canon(t *testing.T, rows []json.RawMessage) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var v any
		require.NoError(t, json.Unmarshal(r, &v))
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
