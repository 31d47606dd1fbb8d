package simrole

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

// vllmArgv is a rendered dynamo.vllm command of a two-node DEP8 worker
// (srt-slurm's shape, our own values): node is 0 or 1.
func vllmArgv(mode string, node int, addr string, rpcPort int, spec string) []string {
	a := []string{"python3", "-m", "dynamo.vllm", "--model", "/model", "--served-model-name", "sim-vllm",
		"--disaggregation-mode", mode, "--device-ids", "0,1,2,3", "--data-parallel-size-local", "4",
		"--data-parallel-start-rank", fmt.Sprint(4 * node), "--data-parallel-address", addr,
		"--data-parallel-rpc-port", fmt.Sprint(rpcPort), "--data-parallel-hybrid-lb", "--request-plane", "nats",
		"--block-size", "256", "--data-parallel-size", "8", "--enable-expert-parallel",
		"--kv-transfer-config", `{"kv_connector": "NixlConnector", "kv_role": "kv_both"}`,
		"--max-model-len", "9280", "--no-enable-prefix-caching", "--tensor-parallel-size", "1", "--trust-remote-code"}
	if spec != "" {
		a = append(a, "--speculative-config", spec)
	}
	return a
}

func TestVLLMArgsAccepted(t *testing.T) {
	a, err := ParseVLLMArgs(vllmArgv("prefill", 1, "10.0.0.1", 8400, vllmSyntheticSpec))
	require.NoError(t, err)
	assert.Equal(t, "prefill", a.Component())
	assert.Equal(t, 8, a.GPUs())
	assert.Equal(t, 2, a.Nodes())
	assert.Equal(t, 1, a.NodeRank())
	assert.NotContains(t, a.Unknown, "kv-transfer-config", "read: it names the connector")
	assert.Equal(t, "NixlConnector", a.KVTransfer["kv_connector"])
	assert.False(t, a.MooncakeStore)
	al, synthetic := a.Acceptance()
	assert.Equal(t, 2.85, al)
	assert.True(t, synthetic)
	s := a.spec()
	assert.Equal(t, workerSpec{Model: "sim-vllm", Mode: "prefill", Component: "prefill", GPUs: 8, EP: 8, DP: 8, DPA: true,
		NNodes: 2, NodeRank: 1, GroupAddr: "10.0.0.1:8400", ContextLength: 9280, AL: 2.85}, s)

	// The eval set: the same speculative config without the synthetic keys
	// runs the simulator's own chain over 3 draft tokens.
	e, err := ParseVLLMArgs(vllmArgv("decode", 0, "10.0.0.1", 8400, `{"method":"mtp","num_speculative_tokens":3}`))
	require.NoError(t, err)
	al, synthetic = e.Acceptance()
	assert.InDelta(t, 2.734375, al, 1e-12)
	assert.False(t, synthetic)
	assert.Equal(t, "backend", e.Component(), "srt-slurm counts a vLLM decode worker as backend")

	// A one-node worker: no group, and data_parallel_size_local defaults
	// to data_parallel_size.
	o, err := ParseVLLMArgs(strings.Fields("python3 -m dynamo.vllm --model /model --data-parallel-size 4 --enable-expert-parallel"))
	require.NoError(t, err)
	assert.Equal(t, 1, o.Nodes())
	assert.Equal(t, "", o.spec().GroupAddr)
	assert.Equal(t, "agg", o.spec().Mode)
}

func TestVLLMRefusals(t *testing.T) {
	base := vllmArgv("decode", 0, "10.0.0.1", 8400, "")
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"local above size", edit(edit(base, "--data-parallel-size-local", "16"), "--device-ids", ""), "data_parallel_size_local (16) must be <= data_parallel_size (8)"},
		{"local without size", edit(edit(base, "--data-parallel-size", ""), "--data-parallel-start-rank", ""), "data_parallel_size_local (4) must be <= data_parallel_size (1)"},
		{"ranks past the group", edit(base, "--data-parallel-start-rank", "6"), "data_parallel_start_rank 6 + data_parallel_size_local 4 runs past data_parallel_size 8"},
		{"unaligned start", edit(edit(base, "--data-parallel-start-rank", "2"), "--data-parallel-size", "12"), "data_parallel_start_rank 2 is not a multiple of data_parallel_size_local 4"},
		{"multi-node without address", edit(base, "--data-parallel-address", ""), "spans nodes (4 local) but --data-parallel-address"},
		{"device ids", edit(base, "--tensor-parallel-size", "2"), "--device-ids lists 4 GPUs but tensor_parallel_size 2 x pipeline_parallel_size 1 x data_parallel_size_local 4 over 1 node(s) = 8 per node"},
		{"bad JSON", vllmArgv("decode", 0, "10.0.0.1", 8400, `{"method": "mtp",`), `argument --speculative-config: want a JSON object, got "{\"method\": \"mtp\","`},
		{"JSON list", vllmArgv("decode", 0, "10.0.0.1", 8400, `[1,2]`), "argument --speculative-config: want a JSON object"},
		{"synthetic without AL", vllmArgv("decode", 0, "10.0.0.1", 8400, `{"num_speculative_tokens":3,"rejection_sample_method":"synthetic"}`), "rejection_sample_method synthetic needs synthetic_acceptance_length"},
		{"AL above drafts+1", vllmArgv("decode", 0, "10.0.0.1", 8400, `{"num_speculative_tokens":2,"rejection_sample_method":"synthetic","synthetic_acceptance_length":3.5}`), "synthetic_acceptance_length: want a number in [1, num_speculative_tokens+1 = 3], got 3.5"},
		{"AL without synthetic", vllmArgv("decode", 0, "10.0.0.1", 8400, `{"num_speculative_tokens":2,"synthetic_acceptance_length":2}`), `rejection_sample_method is "", not synthetic`},
		{"bad tokens", vllmArgv("decode", 0, "10.0.0.1", 8400, `{"num_speculative_tokens":"two"}`), "num_speculative_tokens: want an integer >= 1, got two"},
		{"bad mode", edit(base, "--disaggregation-mode", "both"), "argument --disaggregation-mode: invalid choice: 'both'"},
		{"no model", edit(base, "--model", ""), "the following arguments are required: --model"},
		{"bad int", edit(base, "--data-parallel-size", "eight"), "argument --data-parallel-size: invalid int value: 'eight'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseVLLMArgs(tc.argv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "python3 -m dynamo.vllm: error: "), err.Error())
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	// More local ranks than the node has GPUs (no --device-ids to say so).
	var out bytes.Buffer
	env := map[string]string{EnvGPUsPerNode: "4"}
	err := Run(context.Background(), RoleVLLM, strings.Fields("python3 -m dynamo.vllm --model /model --tensor-parallel-size 8"),
		Options{Getenv: func(k string) string { return env[k] }, Environ: environ(env), Stdout: &out, Stderr: &out})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs 8 GPUs per node, the node has 4")
}

const vllmSyntheticSpec = `{"method":"mtp","num_speculative_tokens":3,"rejection_sample_method":"synthetic","synthetic_acceptance_length":2.85}`

// TestVLLMDeployment: a one-node prefill and a two-node decode vLLM worker
// (hybrid LB: one process per node, the DP-rank-0 process leads) with the
// perf run's synthetic acceptance length in --speculative-config: the
// decode worker's simulated engine uses that length.
func TestVLLMDeployment(t *testing.T) {
	infra := startInfra(t)
	env := func() map[string]string {
		return map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], EnvTimeScale: "0.001",
			"DYN_SYSTEM_PORT": strconv.Itoa(testnet.FreePort(t)), "VLLM_PORT": "20000"}
	}
	prefillArgv := edit(edit(edit(vllmArgv("prefill", 0, "127.0.0.1", 1, vllmSyntheticSpec), "--data-parallel-size", "4"),
		"--data-parallel-address", ""), "--data-parallel-rpc-port", "")
	start(t, RoleVLLM, prefillArgv, env(), Options{}, true)
	rpc := testnet.FreePort(t)
	leaderSys := env()
	decode := start(t, RoleVLLM, vllmArgv("decode", 0, "127.0.0.1", rpc, vllmSyntheticSpec), leaderSys, Options{}, false)
	require.Eventually(t, func() bool { return strings.Contains(decode.log.String(), "waiting for 1 member(s)") }, 10*time.Second, 20*time.Millisecond)
	start(t, RoleVLLM, vllmArgv("decode", 1, "127.0.0.1", rpc, vllmSyntheticSpec), env(), Options{}, true)

	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", testnet.FreePort(t))},
		map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"]}, Options{}, true)
	feURL := "http://" + fe.addrs["http"]
	waitWorkers(t, feURL, 1, 1)
	out := postCompletion(t, feURL, "sim-vllm")
	assert.Equal(t, "sim-vllm", out["model"])

	addr := regexp.MustCompile(`SIMULATED engine listening on (\S+)`).FindStringSubmatch(decode.log.String())
	require.Len(t, addr, 2, decode.log.String())
	info := simInfo(t, addr[1])
	assert.Equal(t, 2.85, info["acceptance_length"], "the synthetic acceptance length from --speculative-config")
	assert.Equal(t, 4.0, info["num_prefill_gpu"])
	assert.Equal(t, 8.0, info["num_decode_gpu"])
	assert.Contains(t, decode.log.String(), "node-rank 1 joined (2/2)")
	assert.Contains(t, decode.log.String(), "acceptance length 2.85 (synthetic true)")
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
