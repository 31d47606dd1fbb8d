package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/reftest"
	"github.com/sweepflow/sweepflow/point"
)

// fleetPairKeys are two of InferenceX's GB200 keys that scripts/fleet.sh
// runs with the rest: a 1P1D Dynamo + SGLang 8k1k deployment (2 nodes, its
// recipe's benchmark sa-bench) and a vLLM deployment with the Mooncake KV
// store (4 nodes, agentic).
var fleetPairKeys = []string{"qwen3.5-fp8-gb200-dynamo-sglang", "kimik3-fp4-gb200-dynamo-vllm-agentic-mooncake-dcp16-agg"}

// TestSlurmFleetPair is scripts/fleet.sh in small: InferenceX's recipes laid
// over srt-slurm v1.0.68 (the shared reference trees, laid out as
// checkouts), the GB200 rack's emulated profile written by `starter cluster
// emulate --checkpoints`, and `starter sweep start --config-keys K1 K2
// --one-point-per-key` as the script runs it. Both keys complete bring-up,
// warmup, perf, eval and teardown through the real launcher; the ledger's
// node-minutes add up; squeue and the simulator roles are empty after.
func TestSlurmFleetPair(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	ixData := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "srt-slurm-recipes")
	srtData := reftest.SrtSlurm(t, "recipes-v1.0.68")
	part := slurmemu.Start(t)
	slurmemu.RequireRoles(t)
	e := newITEnv(t)

	ix, srt := filepath.Join(e.home, "InferenceX"), filepath.Join(e.home, "srt-slurm")
	require.NoError(t, os.MkdirAll(filepath.Join(ix, "benchmarks", "multi_node"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(ixData, "srt-slurm-recipes"), filepath.Join(ix, "benchmarks", "multi_node", "srt-slurm-recipes")))
	require.NoError(t, os.MkdirAll(srt, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(srtData, "recipes-v1.0.68"), filepath.Join(srt, "recipes")))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(e.home, "cache"))

	profile := filepath.Join(e.home, "slurm-emu-gb200.yaml")
	out, code := e.cli("cluster", "emulate", "../configs/clusters/gb200-nvl72.yaml", "--emulation", "../configs/clusters/slurm-emu.yaml",
		"--inferencex", ix, "--srt-slurm", srt, "--checkpoints", "-o", profile)
	require.Equal(t, 0, code, out)
	cl, err := config.LoadCluster(profile)
	require.NoError(t, err)
	sweep := filepath.Join(e.home, "fleet-gb200.yaml")
	require.NoError(t, os.WriteFile(sweep, []byte("name: fleet-gb200\nconfig-files: ["+filepath.Join(ixData, "nvidia-master.yaml")+"]\n"+
		"runner-config: "+filepath.Join(ixData, "runners.yaml")+"\nconfig-keys: ['*gb200*']\ncluster: "+profile+"\nevals: true\n"), 0o644))

	e.startWorkerProcess("worker.log", "--cluster", profile, "--sim-time-scale", "0.1", "--perf-duration", "5s")
	t0 := time.Now()
	out, code = e.cli(append(append([]string{"sweep", "start", "--sweep", sweep, "--config-keys"}, fleetPairKeys...),
		"--inferencex", ix, "--srt-slurm", srt, "--one-point-per-key", "--fast-retries", "--id", "fleet-pair", "--wait")...)
	t.Logf("two keys of the fleet in %s", time.Since(t0).Round(time.Second))
	require.Equal(t, 0, code, out)

	out, code = e.cli("status", "fleet-pair", "--json")
	require.Equal(t, 0, code, out)
	var st struct {
		Counts map[string]int `json:"counts"`
		Points []struct {
			ConfigKey string `json:"config_key"`
			Eval      bool   `json:"eval"`
			Nodes     int    `json:"nodes"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, map[string]int{point.StatusCompleted: 2}, st.Counts)
	var keys []string
	nodes := map[string]int{}
	for _, p := range st.Points {
		keys = append(keys, p.ConfigKey)
		nodes[p.ConfigKey] = p.Nodes
		assert.True(t, p.Eval, "%s runs its eval", p.ConfigKey)
	}
	assert.ElementsMatch(t, fleetPairKeys, keys, "one point per key")
	assert.Equal(t, map[string]int{fleetPairKeys[0]: 2, fleetPairKeys[1]: 4}, nodes)

	// Staging copied the simulated checkpoints the aliases point at.
	staged := 0
	for _, m := range cl.Models {
		matches, _ := filepath.Glob(filepath.Join(strings.ReplaceAll(m.Path, "%n", "gb200-*"), "config.json"))
		staged += len(matches)
	}
	assert.Equal(t, 6, staged, "each node of the two deployments holds its checkpoint")

	cats := e.requireNodeHoursAddUp("fleet-pair")
	for _, c := range []string{"bring-up", "perf", "eval"} {
		assert.Greater(t, cats[c], 0.0, c)
	}
	require.Eventually(t, func() bool { return len(part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs left in squeue: %v", part.Squeue(t))
	require.Eventually(t, func() bool { return len(simRoleProcs(t)) == 0 }, 30*time.Second, 500*time.Millisecond,
		"simulator role processes left: %v", simRoleProcs(t))
}
