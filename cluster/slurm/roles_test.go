package slurm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

func emuEntrypoints(t *testing.T) []config.Entrypoint {
	cl, err := config.LoadCluster(filepath.Join("..", "..", "configs", "clusters", "slurm-emu.yaml"))
	require.NoError(t, err)
	return cl.Emulation.Entrypoints
}

func TestRoleFor(t *testing.T) {
	eps := emuEntrypoints(t)
	for _, tc := range []struct {
		name string
		cmd  []string
		role string
	}{
		{"worker", []string{"python3", "-m", "dynamo.sglang", "--model-path", "/model"}, "sglang-worker"},
		{"frontend", []string{"python3", "-m", "dynamo.frontend", "--http-port=8180"}, "dynamo-frontend"},
		{"infra", []string{"python3", "/tmp/setup_head.py", "--name", "x"}, "infra"},
		{"nginx in bash -c", []string{"bash", "-c", "nginx -c /logs/nginx.conf -g 'daemon off;'"}, "nginx"},
		{"nginx after ulimit", []string{"bash", "-c", "ulimit -n 1048576 && nginx -c /logs/nginx.conf -g 'daemon off;'"}, "nginx"},
		{"benchmark in bash -lc", []string{"bash", "-lc", "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}, "benchmark"},
		{"trtllm worker behind numactl and the MPI launcher", strings.Fields("numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model --extra-engine-args /logs/trtllm_config_prefill.yaml"), "trtllm-worker"},
		{"trtllm worker, numactl --membind=", strings.Fields("numactl --membind=0,1 -l trtllm-llmapi-launch python3 -m dynamo.trtllm"), "trtllm-worker"},
		{"trtllm worker without numactl", strings.Fields("trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model"), "trtllm-worker"},
		{"trtllm worker bare", strings.Fields("python3 -m dynamo.trtllm --model-path /model"), "trtllm-worker"},
		{"trtllm in bash -c", []string{"bash", "-c", "numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model"}, "trtllm-worker"},
		{"vllm worker", strings.Fields("python3 -m dynamo.vllm --model /model --data-parallel-size 8"), "vllm-worker"},
		{"sglang server behind the router", strings.Fields("python3 -m sglang.launch_server --model-path /model"), "sglang-worker"},
		{"sglang router", strings.Fields("python -m sglang_router.launch_router --worker-urls http://10.0.0.1:6100 --host 0.0.0.0 --port 8180"), "sglang-router"},
		{"numactl alone is no match", strings.Fields("numactl -m 0,1"), ""},
		{"a launcher word inside a command is no match", strings.Fields("python3 -m other trtllm-llmapi-launch python3 -m dynamo.trtllm"), ""},
		{"prefix of a word is no match", []string{"python3", "-m", "dynamo.sglangx"}, ""},
		{"unknown", []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, ok := RoleFor(eps, tc.cmd)
			assert.Equal(t, tc.role, role)
			assert.Equal(t, tc.role != "", ok)
		})
	}
	// Every entry point names a role the simulator runs.
	for _, e := range eps {
		assert.Contains(t, simrole.Roles(), e.Role, e.Match)
	}
	// Every process of every seed render maps to a role.
	for _, p := range renderSeed(t, "disagg-gb200-2p1d-dep16-dep32-c1280-dspark6-hicache", 16, 0) {
		_, ok := RoleFor(eps, p.Command)
		assert.True(t, ok, "%s: %s", p.Output, p.CommandLine())
	}
}
