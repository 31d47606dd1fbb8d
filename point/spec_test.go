package point

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpecJSONUnchanged decodes spec payloads recorded in workflow histories
// before Spec moved here (activities.PointSpec; one compact payload a line)
// and encodes them again: the bytes must not change, or recorded histories
// and stored specs would read differently.
func TestSpecJSONUnchanged(t *testing.T) {
	data, err := os.ReadFile("testdata/recorded-specs.jsonl")
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	require.NotEmpty(t, lines)
	for _, line := range lines {
		var s Spec
		require.NoError(t, json.Unmarshal(line, &s))
		require.NotEmpty(t, s.PointID)
		again, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(line), string(again))
	}
}
