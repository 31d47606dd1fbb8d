package matrix

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompactOutputMatchesPythonSeparators(t *testing.T) {
	m, r, _ := loadReference(t)
	rows, err := Generate(m, r, Options{Keys: []string{"dsv4-fp4-gb300-dynamo-sglang-agentic-agg"}})
	require.NoError(t, err)
	out, err := EncodeIXJSON(rows, 0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), `[{"image": "lmsysorg/sglang:nightly-dev-cu13-20260719-99f5a6f4", "model": `), string(out[:80]))
	require.NotContains(t, string(out), "\n")
}
