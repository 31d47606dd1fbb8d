package simrole

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

// renderFeature renders a small recipe (srtlaunch) and returns the process
// whose log file ends in name: the roles get the argv a launch gives them.
func renderFeature(t *testing.T, y, name string) (*srtlaunch.Process, *srtlaunch.Rendered) {
	t.Helper()
	r, err := config.ParseRecipe("x.yaml", []byte(y), "")
	require.NoError(t, err)
	fp, err := r.Footprint(0)
	require.NoError(t, err)
	out, err := srtlaunch.Render(r, srtlaunch.PlaceholderAllocation(r, fp.Nodes), srtlaunch.Options{Paths: srtlaunch.PlaceholderPaths("M"), JobID: "7"})
	require.NoError(t, err)
	for _, p := range out.Processes {
		if strings.HasSuffix(p.Output, "/"+name) {
			return p, out
		}
	}
	t.Fatalf("no %s rendered", name)
	return nil, nil
}

const mooncakeRecipe = `name: mc
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 1}
backend:
  type: vllm
  connector: null
  mooncake_kv_store:
    master_extra_args: ["--max_threads=8"]
    store_config: {metadata_server: P2PHANDSHAKE, global_segment_size: 8GB, protocol: tcp}
  vllm_config:
    aggregated: {tensor-parallel-size: 4, kv-transfer-config: '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'}
`

func TestMooncakeMasterArgs(t *testing.T) {
	master, _ := renderFeature(t, mooncakeRecipe, "mooncake_master.out")
	a, err := ParseMooncakeMaster(master.Command)
	require.NoError(t, err, "the master accepts what srt-slurm launches")
	assert.Equal(t, 8700, a.RPCPort, "--port, rpc_port unset")
	assert.Equal(t, 8701, a.MetadataPort)
	assert.Equal(t, 8702, a.MetricsPort)
	assert.True(t, a.MetadataServer)
	assert.Equal(t, "8", a.Values["max_threads"], "master_extra_args reach the master")

	b, err := ParseMooncakeMaster(strings.Fields("mooncake_master -rpc_port 9000 --noenable_metric_reporting --eviction_ratio=0.5"))
	require.NoError(t, err)
	assert.Equal(t, 9000, b.RPCPort, "rpc_port wins over port")
	assert.False(t, b.Metrics)
	for _, tc := range []struct{ argv, want string }{
		{"mooncake_master --rpc_threads=4", "ERROR: unknown command line flag 'rpc_threads'"},
		{"mooncake_master --port=eighty", "ERROR: illegal value 'eighty' specified for int32 flag 'port'"},
		{"mooncake_master --enable_http_metadata_server=maybe", "illegal value 'maybe' specified for bool flag"},
		{"mooncake_master --eviction_ratio=1.5", "eviction ratio must be between 0.0 and 1.0"},
		{"mooncake_master --metrics_port", "flag 'metrics_port' is missing its argument"},
	} {
		_, err := ParseMooncakeMaster(strings.Fields(tc.argv))
		assert.ErrorContains(t, err, tc.want, tc.argv)
	}
}

// TestMooncakeStoreClients runs the master on 127.0.0.1 and the store
// clients of both engines against it: vLLM's connector reads the store
// config srt-slurm writes (MOONCAKE_CONFIG_PATH) and refuses to start
// without it; SGLang's HiCache backend publishes its segment through the
// metadata server.
func TestMooncakeStoreClients(t *testing.T) {
	rpc, meta, metrics := testnet.FreePort(t), testnet.FreePort(t), testnet.FreePort(t)
	argv := strings.Fields(fmt.Sprintf("mooncake_master --port=%d --enable_http_metadata_server=true --http_metadata_server_port=%d --metrics_port=%d", rpc, meta, metrics))
	m := start(t, RoleMooncake, argv, nil, Options{}, true)
	assert.Contains(t, m.log.String(), LogPrefix+"argv=", "the role logs its argv like the others")

	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"metadata_server": "P2PHANDSHAKE", "master_server_address": "127.0.0.1:%d"}`, rpc)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mooncake_store_config.json"), []byte(cfg), 0o644))
	mounts := Mounts{"/logs": dir}
	getenv := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }
	st, err := vllmMooncakeStore(getenv(map[string]string{"MOONCAKE_CONFIG_PATH": "/logs/mooncake_store_config.json", "MOONCAKE_LOCAL_HOSTNAME": "10.0.0.3"}), mounts)
	require.NoError(t, err)
	assert.Equal(t, mooncakeStore{master: fmt.Sprintf("127.0.0.1:%d", rpc), metadata: "P2PHANDSHAKE", local: "10.0.0.3"}, st)
	require.NoError(t, joinMooncake(context.Background(), st, "vllm"))
	_, err = vllmMooncakeStore(getenv(nil), mounts)
	assert.ErrorContains(t, err, "The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")
	_, err = vllmMooncakeStore(getenv(map[string]string{"MOONCAKE_CONFIG_PATH": "/logs/none.json"}), mounts)
	assert.ErrorContains(t, err, "cannot read MOONCAKE_CONFIG_PATH /logs/none.json")

	sgl := mooncakeStore{master: fmt.Sprintf("127.0.0.1:%d", rpc), metadata: fmt.Sprintf("http://127.0.0.1:%d/metadata", meta), local: "10.0.0.4"}
	require.NoError(t, joinMooncake(context.Background(), sgl, "sglang"))
	code, body := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/metadata?key=mooncake/ram/10.0.0.4", meta))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), `"simulated":true`)
	code, body = getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), "master_client_connections 2")
	assert.Contains(t, string(body), "master_metadata_keys 1")
	assert.Contains(t, string(body), "SIMULATED")

	dead := mooncakeStore{master: fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 300e6)
	defer cancel()
	assert.ErrorContains(t, joinMooncake(ctx, dead, "x"), "cannot reach the master")
}
