package slurm

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

// The launcher reads the result where agentic_srt.sh (and the emulation's
// benchmark role) writes it: $AGENTIC_OUTPUT_DIR/<RESULT_FILENAME>_conc<N>.json,
// AGENTIC_OUTPUT_DIR defaulting to the InferenceX workspace.
func TestResultFile(t *testing.T) {
	ws, logs := t.TempDir(), t.TempDir()
	s := step{Nodes: []string{"gb200-01"},
		Mounts: []kv{{logs, "/logs"}, {ws, "/infmax-workspace"}},
		Env:    []kv{{"INFMAX_CONTAINER_WORKSPACE", "/infmax-workspace"}, {"RESULT_DIR", "/logs/agentic"}}}
	base := []kv{{"MODEL", "m"}, {"MODEL_PREFIX", "dsv4"}, {"FRAMEWORK", "dynamo-sglang"}, {"PRECISION", "fp4"},
		{"CONC", "64"}, {"RESULT_FILENAME", "dsv4_x"}, {"DURATION", "60"}}
	for _, tc := range []struct {
		name  string
		extra []kv
		want  string
	}{
		{"default: the InferenceX workspace", nil, filepath.Join(ws, "dsv4_x_conc64.json")},
		{"AGENTIC_OUTPUT_DIR", []kv{{"AGENTIC_OUTPUT_DIR", "/logs/out"}}, filepath.Join(logs, "out", "dsv4_x_conc64.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(append([]kv{}, base...), tc.extra...)
			got, err := resultFile(s, env, "dsv4_x", 64)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)

			// The benchmark role, given the same environment and mounts,
			// writes exactly there.
			getenv := func(k string) string {
				v := ""
				for _, e := range append(append([]kv{}, s.Env...), env...) {
					if e.K == k {
						v = e.V
					}
				}
				return v
			}
			plan, err := simrole.PlanBenchmark(getenv)
			require.NoError(t, err)
			mounts := simrole.Mounts{"/logs": logs, "/infmax-workspace": ws}
			assert.Equal(t, got, mounts.Host(plan.PointFile(64)))
		})
	}

	_, err := resultFile(s, []kv{{"AGENTIC_OUTPUT_DIR", "/elsewhere"}}, "dsv4_x", 64)
	require.ErrorIs(t, err, cluster.ErrBadConfig)
	require.ErrorContains(t, err, "/elsewhere")
}
