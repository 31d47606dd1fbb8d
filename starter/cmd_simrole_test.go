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
