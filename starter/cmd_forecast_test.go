package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/results"
)

// TestForecastSeedMatchesNodeMinutes: `starter forecast` of the seed sweep
// on the GB200 profile holds exactly the node-minutes `starter bench
// nodeminutes` sums for the same inputs (7020: one bring-up per
// deployment), although it gets them by running the sweep workflow, and it
// adds the makespan the node budget allows: the 16-node 2P1D deployment
// first (20 + 3 x 65 + 20 + 10 = 245 min), then the 12-node and the 6-node
// c64 together (115 min), then c128 (115 min) = 7:55, against a lower
// bound of 117 node-hours / 18 nodes = 6:30.
func TestForecastSeedMatchesNodeMinutes(t *testing.T) {
	in := []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "../configs/clusters/gb200-nvl72.yaml"}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runIO(append([]string{"bench", "nodeminutes", "--json"}, in...), &stdout, &stderr), stderr.String())
	var nm struct {
		Shared float64 `json:"shared-node-minutes"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &nm))
	require.Equal(t, 7020.0, nm.Shared)

	stdout.Reset()
	require.Equal(t, 0, runIO(append([]string{"forecast", "--json"}, in...), &stdout, &stderr), stderr.String())
	var fc struct {
		Clusters []struct {
			Cluster      string             `json:"cluster"`
			Points       int                `json:"points"`
			Deployments  int                `json:"deployments"`
			BringUps     int                `json:"bring_ups"`
			EvalRestarts int                `json:"eval_restarts"`
			NodeHours    float64            `json:"node_hours"`
			GPUHours     float64            `json:"gpu_hours"`
			ByStage      map[string]float64 `json:"node_hours_by_stage"`
			Makespan     float64            `json:"makespan_hours"`
			LowerBound   float64            `json:"lower_bound_hours"`
			Ratio        float64            `json:"makespan_to_lower_bound"`
			CriticalPath []struct {
				Deployment string `json:"deployment"`
				Nodes      int    `json:"nodes"`
			} `json:"critical_path"`
		} `json:"clusters"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &fc), stdout.String())
	require.Len(t, fc.Clusters, 1)
	c := fc.Clusters[0]
	assert.Equal(t, "gb200-nvl72", c.Cluster)
	assert.Equal(t, nm.Shared, c.NodeHours*60, "forecast node-hours x 60 = bench nodeminutes")
	assert.Equal(t, 4*c.NodeHours, c.GPUHours)
	assert.Equal(t, []int{8, 6, 6, 4}, []int{c.Points, c.Deployments, c.BringUps, c.EvalRestarts})
	// 2+2 nodes x 20 min + 6+6+12+16 x 20 min of bring-up; the perf hours
	// are the rows' 60 min on 2+2+6+6+12+3x16 nodes.
	assert.InDelta(t, (4+40)*20.0/60, c.ByStage["bring-up"], 1e-9)
	assert.InDelta(t, 76.0, c.ByStage["perf"], 1e-9)
	assert.InDelta(t, 7+55.0/60, c.Makespan, 1e-9)
	assert.InDelta(t, 117.0/18, c.LowerBound, 1e-9)
	assert.InDelta(t, c.Makespan/c.LowerBound, c.Ratio, 1e-12)
	var path []string
	for _, s := range c.CriticalPath {
		path = append(path, s.Deployment)
	}
	assert.Equal(t, []string{"B6", "B5", "B4"}, path)

	stdout.Reset()
	require.Equal(t, 0, runIO(append([]string{"forecast"}, in...), &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "cluster gb200-nvl72 (18 nodes x 4 GPUs): 8 points, 6 deployments, 6 bring-ups, 4 eval restarts")
	assert.Regexp(t, `total\s+117\.0\s+468\.0`, out)
	assert.Contains(t, out, "makespan 7:55 on 18 nodes; lower bound 6:30 = max(longest deployment 4:05, node-hours / nodes 6:30); makespan / lower bound 1.218")
	assert.Contains(t, out, "0:00-4:05  B6 2P1D DEP16/DEP32 c768,1024,1280, 16 nodes")
	assert.Contains(t, out, "bring-up          20m  profile bring-up-time, 6 runs")
	assert.Contains(t, out, "warmup             5m  assumed (--warmup), 8 runs")
	assert.Contains(t, out, "perf               1h  row duration, 8 runs")
}

func TestForecastFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no sweep", nil, 2, "give --sweep FILE"},
		{"negative warmup", []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--warmup", "-1m"}, 2, "--warmup must not be negative"},
		{"entry without changelog", []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--entry", "1"}, 2, "--entry and --since need --changelog"},
		{"missing cluster file", []string{"--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "nope.yaml"}, 1, "nope.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, tc.code, runIO(append([]string{"forecast"}, tc.args...), &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
}

// TestForecastFromLedgerFlag: --from-ledger reads the store the ledger flags
// name; a ledger that never ran these deployments leaves every assumption
// (and the figures) as they were, and the output says what it would use.
func TestForecastFromLedgerFlag(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "results.db")
	s, err := results.Open(context.Background(), dsn)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	var stdout, stderr bytes.Buffer
	args := []string{"forecast", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "../configs/clusters/gb200-nvl72.yaml",
		"--from-ledger", "--results", dsn}
	require.Equal(t, 0, runIO(args, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "measured stage times from the ledger replace them where it has some")
	assert.Regexp(t, `total\s+117\.0\s+468\.0`, out)
	assert.NotContains(t, out, "ledger (median")

	stdout.Reset()
	stderr.Reset()
	args[len(args)-2], args[len(args)-1] = "--home", t.TempDir()
	assert.Equal(t, 1, runIO(args, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "no results store at")
}

// TestForecastSeedCanary: the forecast of the seed sweep also runs it as
// `sweep start --canary` would, and says what the canary costs. The seed
// is one image and backend (dynamo-sglang), so one canary: the cheapest
// point on an allocation of its own (PointAlone: nodes x (bring-up 20 +
// warmup 5 + perf 60, + restart 20 + eval 10 when it evals)) is c1 or c4,
// 2 x 85 = 170 node-minutes each, and the tie goes to the lower
// concurrency: c1. c1 is already a deployment of its own (B1), so taking
// it out costs no bring-up: 0 extra node-hours. It delays the sweep by
// all of its 85 minutes: without canaries B1 runs 0:00-1:25 on the two
// nodes the 16-node B6 leaves free, so it delays nothing; with it, every
// other point waits for it, and the same schedule (B6 and B2, then B5
// with B3, then B4) starts at 1:25 instead of 0:00: 7:55 + 1:25 = 9:20.
// A failed canary leaves the other 7 points not started: the sweep's 7020
// node-minutes less c1's 170 = 6850 = 114.17 node-hours not spent.
func TestForecastSeedCanary(t *testing.T) {
	in := []string{"forecast", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "../configs/clusters/gb200-nvl72.yaml"}
	type canary struct {
		Headline bool `json:"headline"`
		Groups   []struct {
			Backend        string  `json:"backend"`
			PointID        string  `json:"point_id"`
			Conc           int     `json:"conc"`
			Nodes          int     `json:"nodes"`
			Points         int     `json:"points"`
			NodeHours      float64 `json:"node_hours"`
			StartHours     float64 `json:"start_hours"`
			EndHours       float64 `json:"end_hours"`
			SavedNodeHours float64 `json:"saved_node_hours"`
		} `json:"groups"`
		NodeHours      float64 `json:"node_hours"`
		BringUps       int     `json:"bring_ups"`
		Makespan       float64 `json:"makespan_hours"`
		ExtraNodeHours float64 `json:"extra_node_hours"`
		ExtraBringUps  int     `json:"extra_bring_ups"`
		Delay          float64 `json:"delay_hours"`
	}
	type cluster struct {
		NodeHours    float64 `json:"node_hours"`
		Makespan     float64 `json:"makespan_hours"`
		CriticalPath []struct {
			Deployment string `json:"deployment"`
			Canary     bool   `json:"canary"`
		} `json:"critical_path"`
		Canary *canary `json:"canary"`
	}
	forecastJSON := func(args ...string) cluster {
		t.Helper()
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, runIO(append(append(in, "--json"), args...), &stdout, &stderr), stderr.String())
		var fc struct{ Clusters []cluster }
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &fc), stdout.String())
		require.Len(t, fc.Clusters, 1)
		require.NotNil(t, fc.Clusters[0].Canary)
		return fc.Clusters[0]
	}

	c := forecastJSON()
	cf := c.Canary
	assert.False(t, cf.Headline)
	assert.InDelta(t, 7+55.0/60, c.Makespan, 1e-9, "the headline stays the sweep without canaries")
	require.Len(t, cf.Groups, 1)
	g := cf.Groups[0]
	assert.Equal(t, "dynamo-sglang", g.Backend)
	assert.Regexp(t, `^dsv4_p1x8_d0x8_conc1_`, g.PointID)
	assert.Equal(t, []int{1, 2, 8}, []int{g.Conc, g.Nodes, g.Points})
	assert.InDelta(t, 170.0/60, g.NodeHours, 1e-9)
	assert.InDelta(t, 0, g.StartHours, 1e-9)
	assert.InDelta(t, 85.0/60, g.EndHours, 1e-9)
	assert.InDelta(t, 6850.0/60, g.SavedNodeHours, 1e-9)
	assert.InDelta(t, 117.0, cf.NodeHours, 1e-9)
	assert.Equal(t, 6, cf.BringUps)
	assert.InDelta(t, 0, cf.ExtraNodeHours, 1e-9)
	assert.Zero(t, cf.ExtraBringUps)
	assert.InDelta(t, 9+20.0/60, cf.Makespan, 1e-9)
	assert.InDelta(t, 85.0/60, cf.Delay, 1e-9)

	// --canary: the sweep with the canary is the headline, its critical
	// path starts with the canary, and the comparison is the same.
	h := forecastJSON("--canary")
	assert.True(t, h.Canary.Headline)
	assert.InDelta(t, 9+20.0/60, h.Makespan, 1e-9)
	assert.InDelta(t, 117.0, h.NodeHours, 1e-9)
	var path []string
	for _, s := range h.CriticalPath {
		path = append(path, s.Deployment+map[bool]string{true: " canary"}[s.Canary])
	}
	assert.Equal(t, []string{"B1 canary", "B6", "B5", "B4"}, path)
	h.Canary.Headline = false
	assert.Equal(t, cf, h.Canary)

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runIO(in, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "  with canaries (--canary): 1 canary; makespan 9:20, 1:25 later; 117.0 node-hours, +0.0 (+0 bring-ups, +0 eval restarts)\n")
	assert.Regexp(t, `\n    0:00-1:25  canary TP8 agg c1, 2 nodes, 2\.8 node-hours \(dynamo-sglang lmsysorg/sglang:\S+\); if it fails: 7 points not started, 114\.2 node-hours saved\n`, out)

	stdout.Reset()
	require.Equal(t, 0, runIO(append(in, "--canary"), &stdout, &stderr), stderr.String())
	out = stdout.String()
	assert.Contains(t, out, "cluster gb200-nvl72 (18 nodes x 4 GPUs, canaries first): 8 points, 6 deployments, 6 bring-ups, 4 eval restarts")
	assert.Contains(t, out, "  makespan 9:20 on 18 nodes;")
	assert.Contains(t, out, "    0:00-1:25  B1 canary TP8 agg c1, 2 nodes dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg\n")
	assert.Contains(t, out, "  canaries first, against none: 1 canary; makespan 9:20, 1:25 later;")
}
