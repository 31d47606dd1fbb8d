package simrole

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/energy"
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

func TestVLLMKVEventsArgs(t *testing.T) {
	w, _ := renderFeature(t, `name: kv
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 1}
backend: {type: vllm, kv_events_config: {aggregated: {topic: agg}}, vllm_config: {aggregated: {tensor-parallel-size: 4}}}
`, "gb200-01_agg_w0.out")
	a, err := ParseVLLMArgs(w.Command)
	require.NoError(t, err, "vLLM accepts the --kv-events-config srt-slurm renders")
	assert.Equal(t, 5200, a.KVEventsPort)
	assert.Equal(t, "agg", a.KVEvents["topic"])
	assert.NotContains(t, a.Unknown, "kv-events-config")

	base := "python3 -m dynamo.vllm --model /model --kv-events-config "
	for _, tc := range []struct{ cfg, want string }{
		{`{"publisher": "zmq", "topic": "t", "enable_kv_cache_events": true, "endpoint": "tcp://*:5200", "port": 1}`, "unexpected keyword argument 'port'"},
		{`{"publisher": "nats", "enable_kv_cache_events": true}`, `unknown KV event publisher "nats"`},
		{`{"enable_kv_cache_events": "yes"}`, "KVEventsConfig.enable_kv_cache_events: invalid value yes"},
		{`{"publisher": "zmq", "enable_kv_cache_events": true, "endpoint": "ipc:///tmp/kv"}`, "want tcp://HOST:PORT"},
		{`not json`, "want a JSON object"},
	} {
		_, err := ParseVLLMArgs(append(strings.Fields(base), tc.cfg))
		assert.ErrorContains(t, err, tc.want, tc.cfg)
		assert.ErrorContains(t, err, "python3 -m dynamo.vllm: error: argument --kv-events-config")
	}

	// The publisher binds its endpoint: a second worker on the same port
	// fails as vLLM's zmq socket would.
	port := testnet.FreePort(t)
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	defer taken.Close()
	argv := append(strings.Fields(base), fmt.Sprintf(`{"publisher": "zmq", "enable_kv_cache_events": true, "endpoint": "tcp://*:%d"}`, port))
	var out bytes.Buffer
	err = Run(context.Background(), RoleVLLM, argv, Options{Getenv: func(string) string { return "" }, Environ: []string{}, Stdout: &out, Stderr: &out, BindHost: "127.0.0.1"})
	assert.ErrorContains(t, err, "Address already in use")
}

func TestDCGMExporter(t *testing.T) {
	ex, _ := renderFeature(t, `name: pw
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4, agg_nodes: 1}
backend: {type: sglang}
benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: "1"}
telemetry: {enabled: true, dcgm_exporter: {container_image: dcgm-exporter, port: 19401}}
`, "telemetry_dcgm_exporter.out")
	a, err := ParseDCGMExporter(ex.Command)
	require.NoError(t, err, "dcgm-exporter accepts what srt-slurm launches")
	assert.Equal(t, ":19401", a.Address)
	assert.Equal(t, "100ms", a.CollectInterval.String())
	for _, tc := range []struct{ argv, want string }{
		{"dcgm-exporter --collect-interval=100 --port 9400", "flag provided but not defined: -port"},
		{"dcgm-exporter --collect-interval=fast", `invalid value "fast" for flag -collect-interval`},
		{"dcgm-exporter --address", "flag needs an argument: -address"},
		{"dcgm-exporter serve", `unexpected argument "serve"`},
	} {
		_, err := ParseDCGMExporter(strings.Fields(tc.argv))
		assert.ErrorContains(t, err, tc.want, tc.argv)
	}

	port := testnet.FreePort(t)
	env := map[string]string{"SLURMD_NODENAME": "gb300-07", EnvGPUsPerNode: "4"} // no job: no power board, every GPU idles
	s := start(t, RoleDCGM, strings.Fields(fmt.Sprintf("dcgm-exporter --collect-interval=100 --address :%d", port)), env, Options{}, true)
	assert.Contains(t, s.log.String(), LogPrefix+"env=")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := 0
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, "DCGM_FI_DEV_POWER_USAGE{") {
			continue
		}
		lines++
		assert.Contains(t, l, `Hostname="gb300-07"`)
		assert.Contains(t, l, `modelName="NVIDIA GB300"`)
		assert.Contains(t, l, `simulated="true"`)
		v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		require.NoError(t, err)
		assert.InDelta(t, energy.SimulatedGB200.IdleW, v, 1.61, "the model's idle draw within its 1%% ripple")
	}
	assert.Equal(t, 4, lines, "one sample per GPU of the node")
	assert.Contains(t, string(body), "SIMULATED")
}

// TestVLLMServe runs the direct vLLM frontend's processes as srt-slurm
// renders them for a two-node aggregate worker: node rank 0 serves the
// OpenAI API on --port itself once the headless rank 1 joined at
// --master-addr, without any dynamo registry.
func TestVLLMServe(t *testing.T) {
	_, r := renderFeature(t, `name: dv
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}
frontend: {type: vllm, enable_multiple_frontends: false}
backend: {type: vllm, vllm_config: {aggregated: {tensor-parallel-size: 4, pipeline-parallel-size: 2, served-model-name: sim-serve}}}
`, "gb200-01_agg_w0.out")
	lead, member := r.Processes[0].Command, r.Processes[1].Command
	a, err := ParseVLLMArgs(lead)
	require.NoError(t, err, "vLLM accepts the rendered vllm serve command")
	assert.True(t, a.Serve)
	assert.Equal(t, []any{2, 0, 8000, "/model"}, []any{a.NNodes, a.NodeRankFlag, a.Port, a.Model})
	b, err := ParseVLLMArgs(member)
	require.NoError(t, err)
	assert.True(t, b.Headless)

	port, mport := testnet.FreePort(t), testnet.FreePort(t)
	fix := func(argv []string) []string {
		out := append([]string(nil), argv...)
		for i := range out {
			switch {
			case out[i] == "10.0.0.1":
				out[i] = "127.0.0.1"
			case out[i] == "--port":
				out[i+1] = strconv.Itoa(port)
			}
		}
		return append(out, "--master-port", strconv.Itoa(mport))
	}
	start(t, RoleVLLM, fix(member), nil, Options{}, false)
	s := start(t, RoleVLLM, fix(lead), nil, Options{}, true)
	assert.Contains(t, s.log.String(), "SIMULATED vllm agg worker node 0/2")
	code, body := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/v1/models", port))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), "sim-serve", "the public API lists the served model")

	for _, tc := range []struct{ argv, want string }{
		{"vllm serve /model --nnodes 2 --node-rank 1 --master-addr 10.0.0.1", "node_rank 1 runs no API server: pass --headless"},
		{"vllm serve /model --nnodes 2 --node-rank 0", "nnodes 2 needs --master-addr"},
		{"vllm serve /model --nnodes 2 --node-rank 2 --master-addr h", "node_rank 2 must be in [0, nnodes 2)"},
		{"vllm serve /model --tensor-parallel-size 3 --nnodes 2 --node-rank 0 --master-addr h", "does not split over nnodes 2"},
	} {
		_, err := ParseVLLMArgs(strings.Fields(tc.argv))
		assert.ErrorContains(t, err, tc.want, tc.argv)
	}
}
