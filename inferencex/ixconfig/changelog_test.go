package ixconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseChangelogProblems(t *testing.T) {
	const good = "- config-keys:\n    - a-*\n  description:\n    - d\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/12\n"
	tests := []struct {
		name, text string
		problem    string // "" means the entry is fine
		fileErr    string
	}{
		{name: "good", text: good},
		{name: "XXX before a number", text: "- config-keys: [k]\n  description: [d]\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/XXX\n"},
		{name: "unknown field", text: good + "  priority: 3\n", problem: "cl.yaml:6: entry 1.priority: unknown field"},
		{name: "missing pr-link", text: "- config-keys: [k]\n  description: [d]\n", problem: "cl.yaml:1: entry 1.pr-link: required field is missing"},
		{name: "empty keys", text: "- config-keys: []\n  description: [d]\n  pr-link: XXX\n", problem: "cl.yaml:1: entry 1.config-keys: must not be empty"},
		{name: "bad link", text: "- config-keys: [k]\n  description: [d]\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/2305/changes\n",
			problem: `cl.yaml:3: entry 1.pr-link: "https://github.com/SemiAnalysisAI/InferenceX/pull/2305/changes" is not a PR link`},
		{name: "bad scenario", text: good + "  scenario-type: [agentic]\n", problem: `cl.yaml:6: entry 1.scenario-type[0]: unknown scenario type "agentic"`},
		{name: "append-only with evals", text: good + "  append-only: true\n  evals-only: true\n", problem: "cl.yaml:6: entry 1.append-only: append-only cannot be combined"},
		{name: "min prefill ep", text: good + "  eval-min-prefill-ep: 0\n", problem: "cl.yaml:6: entry 1.eval-min-prefill-ep: must be at least 1"},
		{name: "tab", text: good + "\t\n", fileErr: "cl.yaml:6: a tab"},
		{name: "no final newline", text: good[:len(good)-1], fileErr: "cl.yaml:5: no newline at the end"},
		{name: "not a list", text: "config-keys: [k]\n", fileErr: "cl.yaml:1: expected a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := ParseChangelog("cl.yaml", []byte(tt.text))
			if tt.fileErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.fileErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, cl.Entries, 1)
			err = cl.Check(cl.Entries)
			if tt.problem == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.problem)
		})
	}
}
