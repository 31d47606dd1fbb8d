package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/fuzzseed"
	"github.com/sweepflow/sweepflow/nodehealth"
)

// repoFile returns a path under the repository's configs/ directory.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join("..", "configs", rel)
	_, err := os.Stat(p)
	require.NoError(t, err)
	return p
}

func TestSeedFilesLoad(t *testing.T) {
	s, err := LoadSweep(repoFile(t, "sweeps/dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "dsv4-gb200-agentx", s.Name)
	assert.True(t, s.Evals)
	assert.True(t, filepath.IsAbs(s.ClusterPath))
	configs, err := filepath.Abs(filepath.Join("..", "configs"))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(configs, "dsv4-gb200-agentx.yaml")}, s.ConfigFiles)
	assert.Equal(t, filepath.Join(configs, "runners.yaml"), s.RunnerConfig)
	assert.Equal(t, configs, s.RecipesRoot)
	assert.Len(t, s.ConfigKeys, 2)

	m, err := ixconfig.LoadMaster(s.ConfigFiles...)
	require.NoError(t, err)
	require.Equal(t, s.ConfigKeys, m.Keys())
	r, err := ixconfig.LoadRunners(s.RunnerConfig)
	require.NoError(t, err)
	assert.Equal(t, 4, r.Hardware["cluster:gb200-nv"].GPUsPerNode)
	assert.Equal(t, int64(860160), r.Hardware["cluster:gb200-nv"].AvailableCPUDRAMMiB)

	c, err := LoadCluster(s.ClusterPath)
	require.NoError(t, err)
	assert.Equal(t, "gb200-nvl72", c.Name)
	assert.Equal(t, BackendSlurm, c.Backend)
	assert.Equal(t, 18, c.Nodes)
	assert.Equal(t, 4, c.GPUsPerNode)
	assert.Equal(t, "sbatch", c.Launcher)
	assert.Equal(t, RuntimePyxis, c.Runtime)
	assert.Equal(t, PerfClientBench, c.PerfClient)
	assert.False(t, c.Simulated())
	assert.Contains(t, c.Containers, "dynamo-sglang")
	assert.Equal(t, 6*time.Hour, c.DefaultTimeLimit)
	assert.Equal(t, 20*time.Minute, c.BringUpTime, "a realistic DSv4 Pro bring-up on GB200")
	assert.Equal(t, "cluster-gb200-nvl72", c.TaskQueue)
	assert.True(t, c.ServesRunner("cluster:gb200-nv"))
	assert.False(t, c.ServesRunner("cluster:gb300-nv"))
	assert.Equal(t, "/mnt/numa1/sweepflow/models/DeepSeek-V4-Pro-0813", c.Models["dsv4-pro-0813-nvme"].Path)

	// Every seed recipe parses and is a GB200 DSpark-6 HiCache recipe with the
	// 4 h health budget.
	recipes, err := filepath.Glob(filepath.Join(configs, "recipes", "sglang", "deepseek-v4-0813", "gb200", "agentic", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, recipes, 6)
	for _, p := range recipes {
		rel, err := filepath.Rel(configs, p)
		require.NoError(t, err)
		rec, err := LoadRecipe(configs, filepath.ToSlash(rel))
		require.NoError(t, err, p)
		assert.Equal(t, "gb200", rec.Resources.GPUType, p)
		assert.Equal(t, 4, rec.Resources.GPUsPerNode, p)
		assert.Equal(t, 6, rec.DraftTokens(), p)
		assert.Equal(t, 4*time.Hour, rec.HealthCheck.Timeout(), p)
		lines := strings.Split(string(rec.Raw), "\n")
		require.Greater(t, rec.HealthCheck.Pos.Line, 1, p)
		assert.True(t, strings.HasPrefix(lines[rec.HealthCheck.Pos.Line-1], "health_check:"), "%s: health_check at %s", p, rec.HealthCheck.Pos)
		assert.Contains(t, string(rec.Raw), "enable-hierarchical-cache: true", p)
		assert.Equal(t, "dsv4-pro-0813-nvme", rec.Model.Path, p)
		assert.NotContains(t, string(rec.Raw), "SGLANG_SIMULATE_ACC", "synthetic acceptance must not be baked into recipes")
		_, ok := c.Models[rec.Model.Path]
		assert.True(t, ok, "cluster resolves the recipe's model alias")
	}
}

func TestLocalSimCluster(t *testing.T) {
	t.Setenv("SWEEPFLOW_DATA_DIR", "/data/sf")
	c, err := LoadCluster(repoFile(t, "clusters/local-sim.yaml"))
	require.NoError(t, err)
	assert.Equal(t, BackendLocal, c.Backend)
	assert.Equal(t, "local", c.Launcher)
	assert.Equal(t, 18, c.Nodes)
	assert.Equal(t, 4, c.GPUsPerNode)
	assert.Equal(t, "/data/sf/local-sim/shared", c.SharedRoot)
	assert.Equal(t, "/data/sf/local-sim/nvme", c.NodeLocalRoot)
	configs, err := filepath.Abs(filepath.Join("..", "configs"))
	require.NoError(t, err)
	assert.Equal(t, configs, c.RecipesRoot)

	t.Setenv("SWEEPFLOW_DATA_DIR", "")
	c, err = LoadCluster(repoFile(t, "clusters/local-sim.yaml"))
	require.NoError(t, err)
	repo := filepath.Dir(configs)
	assert.Equal(t, filepath.Join(repo, ".sweepflow", "local-sim", "shared"), c.SharedRoot, "default data dir")
}

// A local profile with a serve-command runs a real engine: not simulated,
// its words' ${VAR}s expanded and ./ or ../ paths made absolute against
// the profile; bad commands are refused by line and field.
func TestLocalServeCommand(t *testing.T) {
	t.Setenv("SF_TEST_PY", "/opt/py/bin/python3")
	local := "name: g\nbackend: local\nnodes: 1\ngpus-per-node: 1\nshared-root: /s\nnode-local-root: /n\n"
	c, err := ParseCluster("g.yaml", "/repo/e2e/g.yaml", []byte(local+
		"serve-command: [\"${SF_TEST_PY}\", ./server.py, --listen, \"{listen}\", --log, \"{work_dir}/x.jsonl\", ../tok.json]\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/py/bin/python3", "/repo/e2e/server.py", "--listen", "{listen}", "--log", "{work_dir}/x.jsonl", "/repo/tok.json"}, c.ServeCommand)
	assert.False(t, c.Simulated(), "a real engine")
	c, err = ParseCluster("g.yaml", "/repo/e2e/g.yaml", []byte(local))
	require.NoError(t, err)
	assert.True(t, c.Simulated(), "no serve-command: the simulator")

	for cmd, want := range map[string]string{
		"serve-command: []\n":                  "g.yaml:7: serve-command: must name the engine's program",
		"serve-command: python3\n":             "g.yaml:7: serve-command: expected a list",
		"serve-command: [\"${SF_UNSET_X}\"]\n": "g.yaml:7: serve-command[0]: environment variable SF_UNSET_X is not set",
	} {
		_, err := ParseCluster("g.yaml", "/repo/e2e/g.yaml", []byte(local+cmd))
		require.ErrorContains(t, err, want, cmd)
	}
}

const baseCluster = `name: c1
backend: slurm
nodes: 18
gpus-per-node: 4
partition: batch
shared-root: /shared
node-local-root: /nvme
`

func TestParseClusterErrors(t *testing.T) {
	cases := []struct{ name, old, new, want string }{
		{"bad backend", "backend: slurm", "backend: k8s", "c.yaml:2: backend: expected slurm or local"},
		{"zero nodes", "nodes: 18", "nodes: 0", "c.yaml:3: nodes: must be > 0"},
		{"unknown field", "nodes: 18\n", "nodes: 18\nracks: 1\n", "c.yaml:4: racks: unknown field"},
		{"missing partition", "partition: batch\n", "", "partition: required for the slurm backend"},
		{"bad launcher", "nodes: 18\n", "nodes: 18\nlauncher: local\n", "launcher: expected sbatch for the slurm backend"},
		{"unset env", "/shared", "${SF_UNSET_VAR_FOR_TEST}/x", "shared-root: environment variable SF_UNSET_VAR_FOR_TEST is not set"},
		{"bad time", "nodes: 18\n", "nodes: 18\ndefault-time-limit: forever\n", "default-time-limit: expected a Slurm time limit"},
		{"missing root", "node-local-root: /nvme\n", "", "node-local-root: required field is missing"},
		{"srtctl removed", "nodes: 18\n", "nodes: 18\nlauncher: srtctl\n", "c.yaml:4: launcher: srtctl was removed"},
		{"bad runtime", "nodes: 18\n", "nodes: 18\nruntime: docker\n", "c.yaml:4: runtime: expected pyxis or none"},
		{"bad perf client", "nodes: 18\n", "nodes: 18\nperf-client: aiperf\n", "c.yaml:4: perf-client: expected benchmark or loadgen"},
		{"empty emulation", "nodes: 18\n", "nodes: 18\nemulation:\n  entrypoints: []\n", "emulation.entrypoints: an emulated partition needs at least one entry point"},
		{"entrypoint without role", "nodes: 18\n", "nodes: 18\nemulation:\n  entrypoints:\n    - {match: nginx}\n", "emulation.entrypoints[0].role: required field is missing"},
		{"bad bring-up time", "nodes: 18\n", "nodes: 18\nbring-up-time: soon\n", "c.yaml:4: bring-up-time: expected a positive duration"},
		{"bad signature regexp", "nodes: 18\n", "nodes: 18\nfailure-signatures:\n  - class: disk-full\n    pattern: 'No space (left'\n", "c.yaml:6: failure-signatures[0].pattern: pattern \"No space (left\": error parsing regexp: missing closing )"},
		{"bad signature class", "nodes: 18\n", "nodes: 18\nfailure-signatures:\n  - {class: Disk Full, pattern: No space}\n", "c.yaml:5: failure-signatures[0].class: class \"Disk Full\""},
		{"signature without pattern", "nodes: 18\n", "nodes: 18\nfailure-signatures:\n  - {class: disk-full}\n", "failure-signatures[0].pattern: required field is missing"},
		{"signature unknown field", "nodes: 18\n", "nodes: 18\nfailure-signatures:\n  - {class: disk-full, pattern: x, retry: no}\n", "failure-signatures[0].retry: unknown field"},
		{"negative bring-up time", "nodes: 18\n", "nodes: 18\nbring-up-time: -5m\n", "bring-up-time: expected a positive duration"},
		{"bad-nodes window", "nodes: 18\n", "nodes: 18\nbad-nodes: {attempts: 2, window: a day}\n", "c.yaml:4: bad-nodes.window: expected a positive duration such as 24h, got \"a day\""},
		{"bad-nodes negative attempts", "nodes: 18\n", "nodes: 18\nbad-nodes:\n  attempts: -1\n", "c.yaml:5: bad-nodes.attempts: expected 0 (never exclude) or more, got -1"},
		{"bad-nodes unknown field", "nodes: 18\n", "nodes: 18\nbad-nodes: {attempt: 3}\n", "bad-nodes.attempt: unknown field"},
		{"serve-command on slurm", "nodes: 18\n", "nodes: 18\nserve-command: [python3, server.py]\n", "c.yaml:4: serve-command: only for the local backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, baseCluster, tc.old)
			_, err := ParseCluster("c.yaml", "/x/c.yaml", []byte(strings.Replace(baseCluster, tc.old, tc.new, 1)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	c, err := ParseCluster("c.yaml", "/x/c.yaml", []byte(baseCluster))
	require.NoError(t, err)
	assert.Equal(t, "sbatch", c.Launcher, "default launcher")
	assert.Equal(t, "cluster-c1", c.TaskQueue, "default task queue")

	c, err = ParseCluster("c.yaml", "/x/c.yaml", []byte(baseCluster+"failure-signatures:\n  - {class: disk-full, pattern: 'No space left on device'}\n"))
	require.NoError(t, err)
	require.Len(t, c.FailureSignatures, 1)
	assert.Equal(t, "disk-full", string(c.FailureSignatures[0].Class))
	assert.Equal(t, "c.yaml:9", c.FailureSignatures[0].Source)
	assert.True(t, c.FailureSignatures[0].Pattern.MatchString("OSError: [Errno 28] No space left on device"))
	assert.Equal(t, nodehealth.DefaultPolicy, c.BadNodes, "bad-nodes left out: the defaults")

	c, err = ParseCluster("c.yaml", "/x/c.yaml", []byte(baseCluster+"bad-nodes:\n  attempts: 3\n"))
	require.NoError(t, err)
	assert.Equal(t, nodehealth.Policy{Attempts: 3, Window: 24 * time.Hour}, c.BadNodes, "a field left out keeps its default")
	c, err = ParseCluster("c.yaml", "/x/c.yaml", []byte(baseCluster+"bad-nodes: {attempts: 0, window: 168h}\n"))
	require.NoError(t, err)
	assert.Equal(t, nodehealth.Policy{Attempts: 0, Window: 168 * time.Hour}, c.BadNodes)
}

func TestSlurmEmuCluster(t *testing.T) {
	c, err := LoadCluster(repoFile(t, "clusters/slurm-emu.yaml"))
	require.NoError(t, err)
	assert.True(t, c.Simulated())
	assert.Equal(t, RuntimeNone, c.Runtime)
	assert.Equal(t, PerfClientBench, c.PerfClient) // perf on the emulation goes through the benchmark process
	require.NotNil(t, c.Emulation)
	assert.Equal(t, Entrypoint{Match: "python3 -m dynamo.sglang", Role: "sglang-worker"}, c.Emulation.Entrypoints[0])
	roles := map[string]string{}
	for _, e := range c.Emulation.Entrypoints {
		roles[e.Match] = e.Role
	}
	assert.Equal(t, map[string]string{
		"python3 -m dynamo.sglang": "sglang-worker", "python3 -m sglang.launch_server": "sglang-worker",
		"python3 -m dynamo.trtllm": "trtllm-worker", "python3 -m dynamo.vllm": "vllm-worker", "vllm serve": "vllm-worker",
		"mooncake_master": "mooncake-master", "dcgm-exporter": "dcgm-exporter",
		"python3 -m dynamo.frontend": "dynamo-frontend", "python -m sglang_router.launch_router": "sglang-router",
		"python3 /tmp/setup_head.py": "infra", "nginx": "nginx",
		"bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh": "benchmark",
	}, roles)
	assert.NotEmpty(t, c.SrtRoot)
}

func TestParseSweepErrors(t *testing.T) {
	base := "name: s\nconfig-files: [a.yaml]\nrunner-config: r.yaml\nconfig-keys: [k]\ncluster: c.yaml\n"
	s, err := ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(base))
	require.NoError(t, err)
	assert.Equal(t, []string{"/x/sweeps/a.yaml"}, s.ConfigFiles)
	assert.Equal(t, "/x/sweeps/c.yaml", s.ClusterPath)
	assert.Equal(t, "", s.RecipesRoot)
	assert.True(t, s.Evals)

	cases := []struct{ name, old, new, want string }{
		{"no keys", "config-keys: [k]", "config-keys: []", "s.yaml:4: config-keys: must not be empty"},
		{"unknown", "name: s\n", "name: s\nkeys: [x]\n", "s.yaml:2: keys: unknown field"},
		{"evals not bool", "name: s\n", "name: s\nevals: sometimes\n", "evals: expected true or false"},
		{"missing cluster", "cluster: c.yaml\n", "", "cluster: required field is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(strings.Replace(base, tc.old, tc.new, 1)))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func FuzzParseClusterAndSweep(f *testing.F) {
	f.Add([]byte(baseCluster))
	fuzzseed.Files(f, []string{"../configs/clusters/*.yaml", "../configs/sweeps/*.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseCluster("fuzz.yaml", "/x/fuzz.yaml", data)
		_, _ = ParseSweep("fuzz.yaml", "/x/fuzz.yaml", data)
	})
}
