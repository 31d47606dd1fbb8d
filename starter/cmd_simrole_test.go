package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/sim/simrole"
)

func TestSimRoleCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stderr     string
		headerArgv []string
	}{
		{"no dash", []string{"sim", "role", "infra"}, 2, "want: sim role ROLE -- ARGV...", nil},
		{"unknown role", []string{"sim", "role", "vllm", "--", "x"}, 2, `unknown role "vllm"`, nil},
		{"worker refuses what sglang refuses", []string{"sim", "role", "sglang-worker", "--", "python3", "-m", "dynamo.sglang",
			"--model-path", "/model", "--disaggregation-mode", "prefill", "--port", "6100"}, 1,
			"needs --disaggregation-bootstrap-port", []string{"python3", "-m", "dynamo.sglang", "--model-path", "/model", "--disaggregation-mode", "prefill", "--port", "6100"}},
		{"trtllm worker without its engine args file", []string{"sim", "role", "trtllm-worker", "--", "numactl", "-m", "0,1", "trtllm-llmapi-launch",
			"python3", "-m", "dynamo.trtllm", "--model-path", "/model", "--disaggregation-mode", "prefill", "--extra-engine-args", "/nonexistent-sweepflow/trtllm_config_prefill.yaml"}, 1,
			"python3 -m dynamo.trtllm: error: --extra-engine-args /nonexistent-sweepflow/trtllm_config_prefill.yaml: no such file", []string{"numactl", "-m", "0,1", "trtllm-llmapi-launch",
				"python3", "-m", "dynamo.trtllm", "--model-path", "/model", "--disaggregation-mode", "prefill", "--extra-engine-args", "/nonexistent-sweepflow/trtllm_config_prefill.yaml"}},
		{"vllm worker with a bad speculative config", []string{"sim", "role", "vllm-worker", "--", "python3", "-m", "dynamo.vllm", "--model", "/model", "--speculative-config", "{mtp"}, 1,
			`python3 -m dynamo.vllm: error: argument --speculative-config: want a JSON object, got "{mtp"`, []string{"python3", "-m", "dynamo.vllm", "--model", "/model", "--speculative-config", "{mtp"}},
		{"router without workers", []string{"sim", "role", "sglang-router", "--", "python", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", "8180"}, 1,
			"no workers given", []string{"python", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", "8180"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runIO(tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one-line error: %q", stderr.String())
			if tc.headerArgv != nil {
				argv, _, err := simrole.ParseLog(&stdout)
				require.NoError(t, err)
				assert.Equal(t, tc.headerArgv, argv)
			}
		})
	}
}
