package simrole

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/testnet"
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

// TestTRTLLMDeployment: a DEP4 prefill worker (one node) and a DEP8 decode
// worker (two nodes, one srun task for the world) behind a dynamo
// frontend: both register, srt-slurm's count sees 1 prefill + 1 decode,
// completions are served by the decode worker, which models the whole
// deployment; a rank > 0 of an MPI step holds its place without
// registering.
func TestTRTLLMDeployment(t *testing.T) {
	logs, _ := writeLogs(t, map[string]string{"trtllm_config_prefill.yaml": trtPrefillYAML, "trtllm_config_decode.yaml": trtDecodeYAML})
	infra := startInfra(t)
	env := func(extra ...string) map[string]string {
		m := map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], EnvTimeScale: "0.001",
			EnvMounts: fmt.Sprintf(`{"/logs": %q}`, logs), "DYN_SYSTEM_PORT": strconv.Itoa(testnet.FreePort(t)),
			"TRTLLM_ENABLE_PDL": "1", "SLURM_STEP_NUM_NODES": "1"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	prefillEnv := env()
	prefill := start(t, RoleTRTLLM, trtllmArgv("prefill", "trtllm_config_prefill.yaml"), prefillEnv, Options{}, true)
	// The decode worker: rank 0 of a step of one task per node on two nodes.
	decode := start(t, RoleTRTLLM, trtllmArgv("decode", "trtllm_config_decode.yaml"),
		env("SLURM_STEP_NUM_NODES", "2", "SLURM_STEP_NUM_TASKS", "2", "SLURM_PROCID", "0"), Options{}, true)
	// Rank 2 of the prefill worker as srt-slurm launches it (4 tasks, one
	// per GPU): no listener, no registration; it watches rank 0.
	rank2 := start(t, RoleTRTLLM, trtllmArgv("prefill", "trtllm_config_prefill.yaml"),
		env("SLURM_NTASKS", "4", "SLURM_PROCID", "2", "SLURM_STEP_NODELIST", "127.0.0.1", "DYN_SYSTEM_PORT", prefillEnv["DYN_SYSTEM_PORT"]), Options{}, false)

	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", testnet.FreePort(t))},
		map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"]}, Options{}, true)
	feURL := "http://" + fe.addrs["http"]
	h := waitWorkers(t, feURL, 1, 1)
	comps := map[string]bool{}
	for _, in := range h.Instances {
		comps[in.Component] = true
	}
	assert.Equal(t, map[string]bool{"prefill": true, "tensorrt_llm": true}, comps)
	code, body := getJSON(t, "http://127.0.0.1:"+prefillEnv["DYN_SYSTEM_PORT"]+"/health")
	assert.Equal(t, http.StatusOK, code, string(body))

	out := postCompletion(t, feURL, "dsr1")
	assert.Equal(t, "dsr1", out["model"])
	assert.Contains(t, decode.log.String(), "SIMULATED engine up: 1P1D DEP4/DEP8", "the decode worker models the whole deployment")
	info := simInfo(t, decode.addrs["engine"])
	assert.Equal(t, 2.734375, info["acceptance_length"], "MTP-3's own acceptance")
	assert.Equal(t, 4.0, info["num_prefill_gpu"])
	assert.Equal(t, 8.0, info["num_decode_gpu"])
	assert.Contains(t, prefill.log.String(), "accepted and ignored 3 LLM API options: cache_transceiver_config cuda_graph_config disable_overlap_scheduler")

	require.Eventually(t, func() bool { return strings.Contains(rank2.log.String(), "MPI rank 2/4 (rank 0 serves the worker)") }, 10*time.Second, 20*time.Millisecond)
	select {
	case err := <-rank2.done:
		t.Fatalf("rank 2 exited: %v", err)
	default:
	}
	assert.NotContains(t, rank2.log.String(), "registered")

	// Rank 0 goes away: the held rank fails, as the MPI world would.
	require.Eventually(t, func() bool { return strings.Contains(rank2.log.String(), "MPI rank 2 sees rank 0 at") }, 10*time.Second, 20*time.Millisecond)
	prefill.cancel()
	select {
	case err := <-rank2.done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "MPI rank 2: rank 0 stopped answering at http://127.0.0.1:"+prefillEnv["DYN_SYSTEM_PORT"]+"/health")
		rank2.done <- err // for cleanup
	case <-time.After(15 * time.Second):
		t.Fatalf("rank 2 kept running without rank 0\n%s\nprefill:\n%s", rank2.log, prefill.log)
	}
}
