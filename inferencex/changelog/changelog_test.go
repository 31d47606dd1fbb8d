package changelog

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

const master = "../../configs/dsv4-gb200-agentx.yaml"

const (
	agg    = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg"
	disagg = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"
)

func parse(t *testing.T, text string) *ixconfig.Changelog {
	t.Helper()
	cl, err := ixconfig.ParseChangelog("cl.yaml", []byte(text))
	require.NoError(t, err)
	return cl
}

func entry(keys, extra string) string {
	return "- config-keys: [" + keys + "]\n  description: [d]\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/1\n" + extra
}

func TestResolve(t *testing.T) {
	m, err := ixconfig.LoadMaster(master)
	require.NoError(t, err)
	both := []string{ixconfig.ScenarioFixedSeqLen, ixconfig.ScenarioAgenticCoding}
	tests := []struct {
		name     string
		text     string
		tput     []KeyScenarios
		evals    []string // keys with evals
		allEvals bool
		evalOnly int
		err      string
	}{
		{name: "glob selects both keys in master order, throughput and evals",
			text: entry("dsv4-fp4-gb200-*-mtp-*", ""),
			tput: []KeyScenarios{{agg, both}, {disagg, both}}, evals: []string{agg, disagg}},
		{name: "no-evals: throughput only",
			text: entry(disagg, "  no-evals: true\n"),
			tput: []KeyScenarios{{disagg, both}}},
		{name: "evals-only: no throughput",
			text: entry(disagg, "  evals-only: true\n"), evals: []string{disagg}, evalOnly: 1},
		{name: "all-evals: no throughput, every eval",
			text: entry(agg, "  all-evals: true\n"), evals: []string{agg}, allEvals: true, evalOnly: 1},
		{name: "scenario-type narrows",
			text: entry(agg, "  scenario-type: [agentic-coding]\n"),
			tput: []KeyScenarios{{agg, []string{ixconfig.ScenarioAgenticCoding}}}, evals: []string{agg}},
		{name: "a key claimed twice runs once",
			text: entry(agg, "") + entry(agg+", "+disagg, ""),
			tput: []KeyScenarios{{agg, both}, {disagg, both}}, evals: []string{agg, disagg}},
		{name: "* is the only wildcard", text: entry(`"dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-ag?"`, ""),
			err: `cl.yaml:1: entry 1.config-keys[0]: config key "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-ag?" not found`},
		{name: "unmatched glob names the line", text: entry(agg, "") + entry("gptoss-*", ""),
			err: `cl.yaml:4: entry 2.config-keys[0]: no config key matches the pattern "gptoss-*"`},
		{name: "append-only cannot mix", text: entry(agg, "  append-only: true\n") + entry(disagg, ""),
			err: "cl.yaml:4: entry 1.append-only: append-only entries cannot share a sweep with regular entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := parse(t, tt.text)
			sel, err := Resolve(cl.Entries, m)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tput, sel.Throughput)
			var evals []string
			for _, e := range sel.Evals {
				evals = append(evals, e.Key)
				assert.Equal(t, tt.allEvals, e.All)
			}
			assert.Equal(t, tt.evals, evals)
			assert.Len(t, sel.EvalOnly, tt.evalOnly)
			// Eval-only entries now run as eval-only points.
			assert.NoError(t, sel.RunnableAsSweep())
			for _, k := range evals {
				row := &matrix.Row{ConfigKey: k, Scenario: ixconfig.ScenarioAgenticCoding}
				ok, all := sel.EvalOnlyRow(row)
				assert.Equal(t, !sel.KeepRow(row), ok, "key %s evals without throughput", k)
				assert.Equal(t, ok && tt.allEvals, all, k)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	cl := parse(t, entry(agg, "")+entry(disagg, "")+entry(agg+", "+disagg, ""))
	idx := func(es []*ixconfig.ChangelogEntry) (out []int) {
		for _, e := range es {
			out = append(out, e.Index)
		}
		return out
	}
	for _, tt := range []struct {
		entry, since int
		want         []int
		err          string
	}{
		{want: []int{3}}, {entry: 2, want: []int{2}}, {entry: -1, want: []int{3}}, {since: 2, want: []int{2, 3}},
		{since: -2, want: []int{2, 3}}, {entry: 4, err: "--entry 4: cl.yaml has entries 1..3"}, {entry: 1, since: 1, err: "mutually exclusive"},
	} {
		got, err := Select(cl, tt.entry, tt.since)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, idx(got), "entry %d since %d", tt.entry, tt.since)
	}
}

func TestAdded(t *testing.T) {
	base := parse(t, entry(agg, ""))
	head := parse(t, entry(agg, "")+"\n"+entry(disagg, "  no-evals: true\n"))
	added, err := Added(base, head)
	require.NoError(t, err)
	require.Len(t, added, 1)
	assert.Equal(t, 2, added[0].Index)

	_, err = Added(base, base)
	assert.ErrorContains(t, err, "no entries added")

	edited := parse(t, entry(disagg, "")+entry(agg, ""))
	_, err = Added(base, edited)
	assert.ErrorContains(t, err, `cl.yaml:1: append-only: base line 1 "- config-keys: [`+agg+`]" was deleted or changed`)
}

// TestRealChangelog resolves the last entries of InferenceX's own changelog
// against its master config: keys (globs included) resolve, and every
// entry that loads well formed stays so.
func TestRealChangelog(t *testing.T) {
	dir := reftest.InferenceX(t, "perf-changelog.yaml", "nvidia-master.yaml")
	cl, err := ixconfig.LoadChangelog(filepath.Join(dir, "perf-changelog.yaml"))
	require.NoError(t, err)
	assert.Greater(t, len(cl.Entries), 500)
	bad := 0
	for _, e := range cl.Entries {
		if len(e.Problems) > 0 {
			bad++
			t.Logf("entry %d: %v", e.Index, e.Problems)
		}
	}
	assert.LessOrEqual(t, bad, 3, "historic entries with problems")
	m, err := ixconfig.LoadMaster(filepath.Join(dir, "nvidia-master.yaml"))
	require.NoError(t, err)
	resolved := 0
	for _, e := range cl.Entries[len(cl.Entries)-40:] {
		if _, err := ResolveKeys(e, m); err == nil {
			resolved++
		}
	}
	// The last entries mostly name NVIDIA keys; AMD ones are not in this master.
	assert.Positive(t, resolved)
}
