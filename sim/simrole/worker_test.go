package simrole

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

// seedPrefill is a rendered DEP8 prefill leader command (the 1P1D seed's
// shape), as a fixture of our own.
func seedPrefill() []string {
	return strings.Fields("python3 -m dynamo.sglang --model-path /model --served-model-name deepseek-ai/DeepSeek-V4-Pro-0813 " +
		"--host 0.0.0.0 --port 6100 --nccl-port 17500 --disaggregation-mode prefill --disaggregation-bootstrap-port 7200 " +
		"--dist-init-addr 10.0.0.1:8300 --nnodes 2 --node-rank 0 --dump-config-to /logs/gb200-01_config.json --request-plane tcp " +
		"--chunked-prefill-size 32768 --data-parallel-size 8 --disaggregation-mode prefill --enable-dp-attention " +
		"--expert-parallel-size 8 --speculative-algorithm DSPARK --speculative-num-draft-tokens 6 --tensor-parallel-size 8 --trust-remote-code")
}

// edit replaces (or with val "" removes) a flag and its value, or appends it.
func edit(argv []string, flag, val string) []string {
	out := []string{}
	found := false
	for i := 0; i < len(argv); i++ {
		if argv[i] == flag {
			found = true
			if val != "" {
				out = append(out, flag, val)
			}
			if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				i++
			}
			continue
		}
		out = append(out, argv[i])
	}
	if !found && val != "" {
		out = append(out, flag, val)
	}
	return out
}

func TestWorkerArgsAccepted(t *testing.T) {
	a, err := ParseWorkerArgs(seedPrefill())
	require.NoError(t, err)
	assert.Equal(t, "prefill", a.Component())
	assert.Equal(t, 8, a.TP)
	assert.Equal(t, 8, a.DP)
	assert.Equal(t, 8, a.EP)
	assert.True(t, a.DPAttention)
	assert.Equal(t, 2, a.NNodes)
	assert.Equal(t, 7200, a.BootstrapPort)
	assert.Equal(t, "deepseek-ai/DeepSeek-V4-Pro-0813", a.Model())
	assert.Contains(t, a.Unknown, "chunked-prefill-size")
	assert.Contains(t, a.Unknown, "trust-remote-code")

	agg := edit(edit(edit(seedPrefill(), "--disaggregation-mode", ""), "--disaggregation-bootstrap-port", ""), "--enable-dp-attention", "")
	agg = edit(edit(edit(agg, "--data-parallel-size", "1"), "--expert-parallel-size", "1"), "--port", "6100")
	a, err = ParseWorkerArgs(agg)
	require.NoError(t, err)
	assert.Equal(t, "backend", a.Component())
}

func TestWorkerArgsRefused(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"prefill without bootstrap port", edit(seedPrefill(), "--disaggregation-bootstrap-port", ""), "needs --disaggregation-bootstrap-port"},
		{"node-rank >= nnodes", edit(seedPrefill(), "--node-rank", "2"), "node_rank=2 must be in [0, nnodes=2)"},
		{"multi-node without dist-init-addr", edit(seedPrefill(), "--dist-init-addr", ""), "needs --dist-init-addr"},
		{"dp not dividing tp with dp attention", edit(seedPrefill(), "--data-parallel-size", "3"), "tp_size=8 must be divisible by dp_size=3"},
		{"tp not divisible by nodes", edit(seedPrefill(), "--nnodes", "3"), "tp_size must be divisible by number of nodes"},
		{"multi-node dp without dp attention", edit(seedPrefill(), "--enable-dp-attention", ""), "multi-node data parallel is not supported unless dp attention!"},
		{"bad int", edit(seedPrefill(), "--port", "sixty"), "argument --port: invalid int value: 'sixty'"},
		{"bad mode", edit(seedPrefill(), "--disaggregation-mode", "encode"), "argument --disaggregation-mode: invalid choice: 'encode'"},
		{"no model path", edit(seedPrefill(), "--model-path", ""), "the following arguments are required: --model-path"},
		{"stray positional", append(seedPrefill()[:3:3], "oops", "--port", "1"), "unrecognized arguments: oops"},
		{"zero tp", edit(seedPrefill(), "--tensor-parallel-size", "0"), "tp_size must be >= 1"},
		{"flag given a value", append(seedPrefill(), "--enable-dp-attention", "yes"), "argument --enable-dp-attention: ignored explicit argument 'yes'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkerArgs(tc.argv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "sglang-like errors are one line")
		})
	}
}

func TestAcceptance(t *testing.T) {
	spec, err := ParseWorkerArgs(seedPrefill())
	require.NoError(t, err)
	plain, err := ParseWorkerArgs(edit(seedPrefill(), "--speculative-algorithm", ""))
	require.NoError(t, err)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	golden := map[string]string{"SGLANG_SIMULATE_ACC_LEN": "3.77", "SGLANG_SIMULATE_ACC_METHOD": "match-expected", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}

	al, synth, err := Acceptance(spec, env(golden))
	require.NoError(t, err)
	assert.Equal(t, 3.77, al)
	assert.True(t, synth)

	al, synth, err = Acceptance(spec, env(nil))
	require.NoError(t, err)
	assert.False(t, synth)
	assert.Greater(t, al, 1.0)
	assert.Less(t, al, 6.0)

	al, _, err = Acceptance(plain, env(nil))
	require.NoError(t, err)
	assert.Equal(t, 1.0, al)

	for k, v := range map[string]string{"SGLANG_SIMULATE_ACC_LEN": "0.5", "SGLANG_SIMULATE_ACC_METHOD": "greedy", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "fake"} {
		bad := map[string]string{}
		for a, b := range golden {
			bad[a] = b
		}
		bad[k] = v
		_, _, err := Acceptance(spec, env(bad))
		assert.ErrorContains(t, err, k)
	}
	// The golden AL in a worker without speculation (InferenceX's injector
	// sets every worker block): ignored, as SGLang ignores it there.
	al, synth, err = Acceptance(plain, env(golden))
	require.NoError(t, err)
	assert.Equal(t, 1.0, al)
	assert.False(t, synth)
}

// TestRenderedSeedCommandsAccepted feeds every process of srt-slurm's
// reference renders (the seed in both modes, its own GB200 fleet and, when
// present, InferenceX's GB200/GB300 recipes) to the argument reading of the
// role it maps to: every worker command must
// pass its engine's checks (a TensorRT-LLM worker's with the
// trtllm_config_<mode>.yaml srt-slurm wrote beside the logs), and the other
// roles must read theirs.
func TestRenderedSeedCommandsAccepted(t *testing.T) {
	root := reftest.SrtSlurm(t, "rendered", "rendered-perf", "rendered-fleet")
	files, err := filepath.Glob(filepath.Join(root, "rendered*", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	counts := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		type proc struct {
			Output  string   `json:"output"`
			Command []string `json:"command"`
		}
		var doc struct {
			Processes []proc            `json:"processes"`
			Files     map[string]string `json:"files"`
		}
		// The seed renders are a list of processes; the fleet's an object
		// with the files written before launch.
		if err := json.Unmarshal(b, &doc.Processes); err != nil {
			require.NoError(t, json.Unmarshal(b, &doc), f)
		}
		logs := t.TempDir()
		for name, body := range doc.Files {
			require.NoError(t, os.WriteFile(filepath.Join(logs, name), []byte(body), 0o644))
		}
		for _, p := range doc.Processes {
			name := filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f) + ":" + filepath.Base(p.Output)
			words, err := EntryWords(p.Command)
			require.NoError(t, err, name)
			line := strings.Join(words, " ")
			switch {
			case strings.HasPrefix(line, "python3 -m dynamo.sglang"):
				a, err := ParseWorkerArgs(p.Command)
				require.NoError(t, err, name)
				assert.NotEmpty(t, a.Model(), name)
				counts["worker"]++
			case strings.Contains(line, "python3 -m dynamo.trtllm"):
				a, err := ParseTRTLLMArgs(p.Command, Mounts{"/logs": logs})
				require.NoError(t, err, name)
				assert.Positive(t, a.TP, name)
				counts["trtllm"]++
			case strings.HasPrefix(line, "python3 -m dynamo.vllm"):
				_, err := ParseVLLMArgs(p.Command)
				require.NoError(t, err, name)
				counts["vllm"]++
			case strings.HasPrefix(line, "vllm serve "):
				a, err := ParseVLLMArgs(words)
				require.NoError(t, err, name)
				assert.True(t, a.Serve, name)
				counts["vllm serve"]++
			case strings.HasPrefix(line, "mooncake_master "):
				a, err := ParseMooncakeMaster(words)
				require.NoError(t, err, name)
				assert.Equal(t, "8700", a.Values["port"], name)
				counts["mooncake_master"]++
			case strings.HasPrefix(line, "python3 -m sglang.launch_server"):
				_, err := ParseWorkerArgs(p.Command)
				require.NoError(t, err, name)
				counts["sglang-server"]++
			case strings.HasPrefix(line, "python -m sglang_router.launch_router"):
				_, err := ParseRouterArgs(p.Command)
				require.NoError(t, err, name)
				counts["router"]++
			case strings.HasPrefix(line, "bash /srtctl-benchmarks/"):
				counts["srt-slurm benchmark"]++ // runs outside the emulation (perf-client)
			case strings.HasPrefix(line, "python3 -m dynamo.frontend"):
				port, err := parseFrontend(p.Command)
				require.NoError(t, err, name)
				assert.Positive(t, port, name)
				counts["frontend"]++
			case strings.HasPrefix(line, "python3 /tmp/setup_head.py"):
				a, err := parseInfra(p.Command)
				require.NoError(t, err, name)
				assert.NotEmpty(t, a.name, name)
				counts["infra"]++
			case strings.HasPrefix(line, "nginx"):
				c, err := nginxConfPath(p.Command)
				require.NoError(t, err, name)
				assert.Equal(t, "/logs/nginx.conf", c, name)
				counts["nginx"]++
			case strings.HasPrefix(line, "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"):
				counts["benchmark"]++
			default:
				t.Errorf("%s: no role for %q", name, line)
			}
		}
	}
	t.Logf("rendered processes checked: %v", counts)
	for _, k := range []string{"worker", "frontend", "infra", "nginx", "benchmark", "trtllm", "vllm", "router"} {
		assert.Positive(t, counts[k], k)
	}
	if _, err := os.Stat(filepath.Join(root, "rendered-ix")); err == nil {
		for _, k := range []string{"mooncake_master", "vllm serve"} {
			assert.Positive(t, counts[k], k)
		}
	}
}
