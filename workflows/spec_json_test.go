package workflows

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

// TestRecordedSpecsRoundTrip finds every point spec inside the recorded
// histories' payloads (workflow and activity inputs and results), decodes it
// into point.Spec and encodes it again: the bytes must equal the recorded
// ones, so no field of a recorded spec is lost or renamed on replay.
func TestRecordedSpecsRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var hist any
		require.NoError(t, json.Unmarshal(data, &hist))
		var specs []json.RawMessage
		for _, p := range jsonPayloads(hist) {
			specs = append(specs, findSpecs(p)...)
		}
		for _, raw := range specs {
			var s point.Spec
			require.NoError(t, json.Unmarshal(raw, &s), f)
			again, err := json.Marshal(s)
			require.NoError(t, err)
			require.Equal(t, string(raw), string(again), f)
		}
		total += len(specs)
	}
	require.Positive(t, total, "no point spec found in the recorded histories")
}

// jsonPayloads decodes the json/plain payloads anywhere in a history.
func jsonPayloads(v any) [][]byte {
	plain := base64.StdEncoding.EncodeToString([]byte("json/plain"))
	var out [][]byte
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			md, _ := x["metadata"].(map[string]any)
			if d, ok := x["data"].(string); ok && md != nil && md["encoding"] == plain {
				if b, err := base64.StdEncoding.DecodeString(d); err == nil {
					out = append(out, b)
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return out
}

// findSpecs returns the objects in a JSON document that are point specs (they
// have point_id, config_key and topology), as their recorded bytes.
func findSpecs(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	var out []json.RawMessage
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		_, id := m["point_id"]
		_, key := m["config_key"]
		_, topo := m["topology"]
		if id && key && topo {
			return []json.RawMessage{raw}
		}
		for _, v := range m {
			out = append(out, findSpecs(v)...)
		}
	case len(raw) > 0 && raw[0] == '[':
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil {
			return nil
		}
		for _, v := range l {
			out = append(out, findSpecs(v)...)
		}
	}
	return out
}
