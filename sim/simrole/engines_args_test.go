package simrole

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trtllmArgv is a rendered TensorRT-LLM worker command in srt-slurm's shape
// (a fixture of our own).
func trtllmArgv(mode, yamlName string) []string {
	a := strings.Fields("numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model --served-model-name dsr1")
	if mode != "" {
		a = append(a, "--disaggregation-mode", mode)
	}
	if yamlName != "" {
		a = append(a, "--extra-engine-args", "/logs/"+yamlName)
	}
	return append(a, "--request-plane", "nats")
}

// A DEP4 prefill and a DEP8 MTP-3 decode worker's LLM API options, in the
// keys srt-slurm's trtllm recipes write (our own values).
const (
	trtPrefillYAML = `cache_transceiver_config:
  backend: UCX
cuda_graph_config: null
disable_overlap_scheduler: true
enable_attention_dp: true
max_batch_size: 16
max_num_tokens: 16384
max_seq_len: 2048
moe_expert_parallel_size: 4
pipeline_parallel_size: 1
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 3
tensor_parallel_size: 4
`
	trtDecodeYAML = `enable_attention_dp: true
max_batch_size: 64
max_seq_len: 2088
moe_expert_parallel_size: 8
tensor_parallel_size: 8
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 3
`
)

func writeLogs(t *testing.T, files map[string]string) (string, Mounts) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir, Mounts{"/logs": dir}
}

func TestTRTLLMArgsAccepted(t *testing.T) {
	_, m := writeLogs(t, map[string]string{"p.yaml": trtPrefillYAML, "d.yaml": trtDecodeYAML})
	a, err := ParseTRTLLMArgs(append(trtllmArgv("prefill", "p.yaml"), "--publish-events-and-metrics"), m)
	require.NoError(t, err)
	assert.Equal(t, "prefill", a.Component())
	assert.Equal(t, []int{4, 1, 4}, []int{a.TP, a.PP, a.EP})
	assert.True(t, a.AttentionDP)
	assert.Equal(t, 2048, a.MaxSeqLen)
	assert.Equal(t, []string{"request-plane", "publish-events-and-metrics"}, a.Unknown)
	assert.Equal(t, []string{"cache_transceiver_config", "cuda_graph_config", "disable_overlap_scheduler"}, a.Ignored)
	// MTP with 3 next-token layers: 4 tokens a step, each draft accepted
	// with p = 0.75 while the chain holds: (1 - 0.75^4) / 0.25.
	assert.InDelta(t, 2.734375, a.Acceptance(), 1e-12)
	s := a.spec()
	assert.Equal(t, workerSpec{Model: "dsr1", Mode: "prefill", Component: "prefill", GPUs: 4, EP: 4, DP: 4, DPA: true,
		NNodes: 1, ContextLength: 2048, AL: 2.734375}, s)

	d, err := ParseTRTLLMArgs(trtllmArgv("decode", "d.yaml"), m)
	require.NoError(t, err)
	assert.Equal(t, "tensorrt_llm", d.Component(), "srt-slurm counts a TensorRT-LLM decode worker by this component")
	assert.Equal(t, 8, d.GPUs())

	// No launcher words, no YAML, no mode: an aggregated TP1 worker.
	g, err := ParseTRTLLMArgs(strings.Fields("python3 -m dynamo.trtllm --model-path /model"), m)
	require.NoError(t, err)
	assert.Equal(t, "agg", g.spec().Mode)
	assert.Equal(t, "tensorrt_llm", g.Component())
	assert.Equal(t, 1.0, g.Acceptance())
}

func TestTRTLLMRefusals(t *testing.T) {
	dir, m := writeLogs(t, map[string]string{
		"bad.yaml":   "tensor_parallel_size: 4\n  moe: [1,\n",
		"list.yaml":  "- tensor_parallel_size: 4\n",
		"empty.yaml": "",
		"tp.yaml":    "max_batch_size: 8\ntensor_parallel_size: four\n",
		"ep.yaml":    "tensor_parallel_size: 4\nmoe_expert_parallel_size: 3\n",
		"adp.yaml":   "enable_attention_dp: yes please\n",
		"spec.yaml":  "tensor_parallel_size: 4\nspeculative_config:\n  decoding_type: Medusa\n",
		"eagle.yaml": "tensor_parallel_size: 4\nspeculative_config:\n  decoding_type: Eagle\n",
	})
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"missing file", trtllmArgv("prefill", "none.yaml"), fmt.Sprintf("--extra-engine-args /logs/none.yaml (host %s/none.yaml): no such file", dir)},
		{"not YAML", trtllmArgv("prefill", "bad.yaml"), "/logs/bad.yaml (host " + dir + "/bad.yaml): not valid YAML: yaml: line 2:"},
		{"not a mapping", trtllmArgv("prefill", "list.yaml"), "list.yaml:1: want a mapping of LLM API options, got a sequence"},
		{"empty", trtllmArgv("prefill", "empty.yaml"), "empty.yaml:1: want a mapping of LLM API options, got an empty file"},
		{"bad int", trtllmArgv("prefill", "tp.yaml"), `tp.yaml:2: tensor_parallel_size: want an integer >= 1, got "four"`},
		{"ep does not divide tp", trtllmArgv("prefill", "ep.yaml"), "moe_expert_parallel_size 3 does not divide tensor_parallel_size 4"},
		{"bad bool", trtllmArgv("prefill", "adp.yaml"), `adp.yaml:1: enable_attention_dp: want true or false, got "yes please"`},
		{"unmodelled decoding type", trtllmArgv("prefill", "spec.yaml"), `spec.yaml:3: speculative_config.decoding_type: want one of MTP`},
		{"eagle without draft length", trtllmArgv("prefill", "eagle.yaml"), `eagle.yaml:3 (host ` + dir + `/eagle.yaml): speculative_config.max_draft_len: missing, want the number of draft tokens per step`},
		{"bad mode", trtllmArgv("both", ""), "argument --disaggregation-mode: invalid choice: 'both'"},
		{"no module", []string{"trtllm-llmapi-launch", "python3", "-m", "dynamo.sglang"}, "no `python3 -m dynamo.trtllm`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTRTLLMArgs(tc.argv, m)
			require.Error(t, err)
			got := err.Error()
			if !strings.Contains(tc.want, "(host ") {
				// the container path and line, then the host path
				got = strings.Replace(got, " (host "+dir+"/"+strings.TrimPrefix(tc.argv[len(tc.argv)-3], "/logs/")+")", "", 1)
			}
			assert.Contains(t, got, tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "python3 -m dynamo.trtllm: error: "), err.Error())
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// TestTRTLLMWorldSize: tp x pp must be the GPUs the srun step got, counted
// from the step's tasks (one per GPU, as srt-slurm launches) or, for a
// single-task step, its nodes and GPUs per node.
func TestTRTLLMWorldSize(t *testing.T) {
	_, m := writeLogs(t, map[string]string{"p.yaml": trtPrefillYAML})
	mounts := fmt.Sprintf(`{"/logs": %q}`, m["/logs"])
	tests := []struct {
		name string
		env  map[string]string
		want string // "" = accepted (fails later, on the missing registry)
	}{
		{"one node of 4", map[string]string{"SLURM_STEP_NUM_NODES": "1"}, ""},
		{"two nodes", map[string]string{"SLURM_STEP_NUM_NODES": "2"}, "tensor_parallel_size 4 x pipeline_parallel_size 1 = 4 ranks, but the worker got 8 GPUs (2 node(s) x 4 GPUs)"},
		{"part of a node", map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}, "but the worker got 2 GPUs (1 node(s) x 2 GPUs)"},
		{"4 MPI tasks", map[string]string{"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_STEP_NUM_NODES": "2"}, ""},
		{"8 MPI tasks", map[string]string{"SLURM_NTASKS": "8", "SLURM_PROCID": "3"}, "but the worker got 8 GPUs (8 MPI tasks)"},
		{"one task per node", map[string]string{"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "2"}, "but the worker got 8 GPUs (2 node(s) x 4 GPUs)"},
		{"bad rank", map[string]string{"SLURM_NTASKS": "4", "SLURM_PROCID": "4"}, "SLURM_PROCID=\"4\": want a rank in [0, 4 tasks)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env[EnvMounts] = mounts
			var out bytes.Buffer
			err := Run(context.Background(), RoleTRTLLM, trtllmArgv("prefill", "p.yaml"),
				Options{Getenv: func(k string) string { return tc.env[k] }, Environ: environ(tc.env), Stdout: &out, Stderr: &out, BindHost: "127.0.0.1"})
			require.Error(t, err)
			if tc.want == "" {
				assert.Contains(t, err.Error(), "ETCD_ENDPOINTS is not set", "accepted, then needs the registry")
				return
			}
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

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

const vllmSyntheticSpec = `{"method":"mtp","num_speculative_tokens":3,"rejection_sample_method":"synthetic","synthetic_acceptance_length":2.85}`

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

func TestRouterArgs(t *testing.T) {
	a, err := ParseRouterArgs(strings.Fields("python -m sglang_router.launch_router --pd-disaggregation --prefill http://10.0.0.1:6100 7200 --prefill http://10.0.0.2:6100 --decode http://10.0.0.3:6100 --host 0.0.0.0 --port 8180 --policy round_robin"))
	require.NoError(t, err)
	assert.True(t, a.PD)
	assert.Equal(t, 8180, a.Port)
	assert.Equal(t, []RouterWorker{{URL: "http://10.0.0.1:6100", Type: "prefill", BootstrapPort: 7200}, {URL: "http://10.0.0.2:6100", Type: "prefill"},
		{URL: "http://10.0.0.3:6100", Type: "decode"}}, a.Workers)
	assert.Equal(t, []string{"policy"}, a.Unknown)

	tests := []struct {
		name, args, want string
	}{
		{"no workers", "--host 0.0.0.0 --port 8180", "no workers given"},
		{"empty worker-urls", "--worker-urls --port 8180", "no workers given"},
		{"pd without decode", "--pd-disaggregation --prefill http://10.0.0.1:6100 7200", "needs at least one --prefill and one --decode worker (got 1 prefill, 0 decode)"},
		{"prefill without pd", "--prefill http://10.0.0.1:6100 --decode http://10.0.0.2:6100", "--prefill and --decode need --pd-disaggregation"},
		{"mixed", "--pd-disaggregation --worker-urls http://10.0.0.1:6100 --prefill http://10.0.0.1:6100 --decode http://10.0.0.2:6100", "--worker-urls cannot be used with --pd-disaggregation"},
		{"bad url", "--worker-urls 10.0.0.1:6100", `argument --worker-urls: "10.0.0.1:6100" is not an http://HOST:PORT worker URL`},
		{"bad bootstrap", "--pd-disaggregation --prefill http://10.0.0.1:6100 x --decode http://10.0.0.2:6100", `bootstrap port "x" is not a port`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRouterArgs(append(strings.Fields("python -m sglang_router.launch_router"), strings.Fields(tc.args)...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), routerProg+": error: "), err.Error())
		})
	}
}

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"gb200-[03-10]": "gb200-03", "gb200-03,gb200-04": "gb200-03", "gb200-[03,05-06]": "gb200-03",
		"gb200-07": "gb200-07", "127.0.0.1": "127.0.0.1", "a[1-2],b[3-4]": "a1", "": "",
	} {
		assert.Equal(t, want, firstHost(in), in)
	}
}
