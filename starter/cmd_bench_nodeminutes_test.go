package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchNodeMinutesSeed: the seed sweep on the GB200 profile (bring-up
// 20 min, 60 min perf per row, 5 min warmup and 10 min eval assumed):
// 2+2+6+6+12 nodes cost the same either way; the 2P1D deployment holds 16
// nodes for 20 + 3 x 65 + 20 + 10 = 245 min shared instead of 85 + 85 + 115.
func TestBenchNodeMinutesSeed(t *testing.T) {
	args := []string{"bench", "nodeminutes", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "../configs/clusters/gb200-nvl72.yaml"}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runIO(args, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "bring-up 20m0s (cluster profile bring-up-time")
	assert.Regexp(t, `B6\s+2P1D DEP16/DEP32\s+16\s+768,1024,1280\s+1\s+3920\s+4560`, out)
	assert.Contains(t, out, "bring-ups: 6 perf + 4 eval restarts shared, 8 perf + 4 eval restarts one per point")
	assert.Contains(t, out, "node-minutes: 7020 shared vs 7660 per point: 640 saved (8.4%), ratio 1.091")

	stdout.Reset()
	require.Equal(t, 0, runIO(append(args, "--json", "--warmup", "0s"), &stdout, &stderr), stderr.String())
	var rep struct {
		Times struct {
			BringUp float64 `json:"bring-up-minutes"`
		} `json:"times"`
		SharedPerf int     `json:"shared-perf-bring-ups"`
		PointPerf  int     `json:"per-point-perf-bring-ups"`
		Shared     float64 `json:"shared-node-minutes"`
		PerPoint   float64 `json:"per-point-node-minutes"`
		Ratio      float64 `json:"ratio"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	assert.Equal(t, 20.0, rep.Times.BringUp)
	assert.Equal(t, 6, rep.SharedPerf)
	assert.Equal(t, 8, rep.PointPerf)
	// No warmup: 2P1D 16 x (20 + 180 + 30) = 3680 vs 16 x (80 + 80 + 110) = 4320.
	assert.InDelta(t, 170-10+170-10+690-30+690-30+1380-60+3680, rep.Shared, 1e-9)
	assert.InDelta(t, 170-10+170-10+690-30+690-30+1380-60+4320, rep.PerPoint, 1e-9)
	assert.InDelta(t, rep.PerPoint/rep.Shared, rep.Ratio, 1e-12)
}

func TestBenchNodeMinutesErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no sweep", nil, 2, "give --sweep FILE"},
		{"negative eval", []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--eval", "-1m"}, 2, "must not be negative"},
		{"missing cluster file", []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "nope.yaml"}, 1, "nope.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, tc.code, runIO(append([]string{"bench", "nodeminutes"}, tc.args...), &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
}
