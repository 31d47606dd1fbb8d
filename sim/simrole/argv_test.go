package simrole

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShellWordsAndEntryWords(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want []string
	}{
		{"nginx as rendered", []string{"bash", "-c", "nginx -c /logs/nginx.conf -g 'daemon off;'"}, []string{"nginx", "-c", "/logs/nginx.conf", "-g", "daemon off;"}},
		{"benchmark as rendered", []string{"bash", "-lc", "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}, []string{"bash", "/infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}},
		{"double quotes and escapes", []string{"bash", "-c", `echo "a \"b\" c" d\ e`}, []string{"echo", `a "b" c`, "d e"}},
		{"plain argv unchanged", []string{"python3", "-m", "dynamo.sglang", "--port", "6100"}, []string{"python3", "-m", "dynamo.sglang", "--port", "6100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EntryWords(tc.argv)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ShellWords("echo 'open")
	assert.ErrorContains(t, err, "unterminated single quote")
}
