package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/control"
)

const (
	seedSweep  = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	clFixture  = "../control/testdata/changelog/perf-changelog.yaml"
	clBadEntry = "../control/testdata/changelog/bad-entries.yaml"
)

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

func TestPlanChangelogDryRun(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: control.ChangelogRef{Path: clFixture, Entry: 1}}))
	assert.Regexp(t, `changelog entry 1 \(\S*control/testdata/changelog/perf-changelog\.yaml:5\)`, stdout.String())
	assert.Contains(t, stdout.String(), "8 points, 44 node-allocations, 4 with eval")
}

// TestPlanChangelogEvalOnly: plan shows an evals-only entry's points as
// eval-only.
func TestPlanChangelogEvalOnly(t *testing.T) {
	const clEvals = "../control/testdata/changelog/evals.yaml"
	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: control.ChangelogRef{Path: clEvals, Entry: 1}}))
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
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: control.ChangelogRef{Path: clFixture, Entry: 1}}), &got))
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
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: control.ChangelogRef{Path: clFixture, Entry: 3}}), &eo))
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
