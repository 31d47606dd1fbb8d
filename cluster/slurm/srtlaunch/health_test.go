package srtlaunch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

func TestFrontendHealthCountsGenerateEndpoints(t *testing.T) {
	cases := []struct {
		name            string
		body            string
		prefill, decode int
		wantErr         bool
	}{
		{"disagg", `{"status":"healthy","instances":[{"component":"prefill","endpoint":"generate"},{"component":"prefill","endpoint":"clear_kv_blocks"},{"component":"decode","endpoint":"generate"},{"component":"prefill","endpoint":"generate"}]}`, 2, 1, false},
		{"agg counts as decode", `{"instances":[{"component":"backend","endpoint":"generate"}]}`, 0, 1, false},
		{"no workers yet", `{"status":"healthy","instances":[]}`, 0, 0, false},
		{"not dynamo", `{"status":"ok"}`, 0, 0, true},
		{"not json", `ok`, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseFrontendHealth([]byte(c.body))
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			p, d := h.Workers()
			assert.Equal(t, c.prefill, p)
			assert.Equal(t, c.decode, d)
		})
	}
}

func TestExpectedWorkersOfSeedLayouts(t *testing.T) {
	r, err := config.LoadRecipe("../../../configs", "recipes/sglang/deepseek-v4-0813/gb200/agentic/disagg-gb200-2p1d-dep16-dep32-c1280-dspark6-hicache.yaml")
	require.NoError(t, err)
	procs, err := Render(r, PlaceholderAllocation(r, 18), Options{Paths: PlaceholderPaths("DeepSeek-V4-Pro-0813")})
	require.NoError(t, err)
	p, d := Expected(procs.Processes)
	assert.Equal(t, 2, p)
	assert.Equal(t, 1, d)
}

// An SGLang router reports its workers on /workers; srt-slurm counts
// regular (aggregated) workers as decode.
func TestRouterWorkers(t *testing.T) {
	p, d, err := RouterWorkers([]byte(`{"workers":[],"total":4,"stats":{"prefill_count":2,"decode_count":1,"regular_count":1}}`))
	require.NoError(t, err)
	assert.Equal(t, 2, p)
	assert.Equal(t, 2, d)
	_, _, err = RouterWorkers([]byte(`{"status":"healthy","instances":[]}`))
	assert.ErrorContains(t, err, `no "stats"`, "a dynamo /health answer is not a router's")
	_, _, err = RouterWorkers([]byte(`ok`))
	assert.Error(t, err)
}
