package sim

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

func TestParseDeployment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in              string
		want            Deployment
		str             string
		prefill, decode int
		nodes           int
	}{
		{"2P1D DEP16/DEP32", Deployment{2, 16, 16, true, 1, 32, 32, true, true, 4}, "2P1D DEP16/DEP32", 32, 32, 16},
		{"1p1d dep8/dep16", Deployment{1, 8, 8, true, 1, 16, 16, true, true, 4}, "1P1D DEP8/DEP16", 8, 16, 6},
		{"1P1D DEP16/DEP32", Deployment{1, 16, 16, true, 1, 32, 32, true, true, 4}, "1P1D DEP16/DEP32", 16, 32, 12},
		{"TP8 agg", Deployment{1, 8, 1, false, 0, 8, 1, false, false, 4}, "TP8 agg", 8, 0, 2},
		{"TP8", Deployment{1, 8, 1, false, 0, 8, 1, false, false, 4}, "TP8 agg", 8, 0, 2},
		{"2xTEP8 agg", Deployment{2, 8, 8, false, 0, 8, 8, false, false, 4}, "2xTEP8 agg", 16, 0, 4},
		{"1P6D DEP8/TP4", Deployment{1, 8, 8, true, 6, 4, 1, false, true, 4}, "1P6D DEP8/TP4", 8, 24, 8},
		{"1P1D DEP8", Deployment{1, 8, 8, true, 1, 8, 8, true, true, 4}, "1P1D DEP8/DEP8", 8, 8, 4},
		{"1P1D TP8EP4DPA/TP16EP16", Deployment{1, 8, 4, true, 1, 16, 16, false, true, 4}, "1P1D TP8EP4DPA/TEP16", 8, 16, 6},
		{"p2x16ep16dpa_d1x32ep32dpa", Deployment{2, 16, 16, true, 1, 32, 32, true, true, 4}, "2P1D DEP16/DEP32", 32, 32, 16},
		{"p1x8_d0x8", Deployment{1, 8, 1, false, 0, 8, 1, false, false, 4}, "TP8 agg", 8, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDeployment(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, d)
			assert.Equal(t, tc.str, d.String())
			assert.Equal(t, tc.prefill, d.PrefillGPUs())
			assert.Equal(t, tc.decode, d.DecodeGPUs())
			assert.Equal(t, tc.nodes, d.Nodes())
			back, err := ParseDeployment(d.String())
			require.NoError(t, err)
			assert.Equal(t, d, back, "String round-trips")
		})
	}
}

func TestParseDeploymentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"2P1D", "no parallelism"},
		{"DEP8/DEP16", "worker counts"},
		{"2P1D DEP16/DEP32 agg", "cannot be combined"},
		{"0P1D DEP8/DEP16", "prefill workers must be >= 1"},
		{"1P0D DEP8/DEP16", "decode workers must be >= 1"},
		{"1P1D DEP0/DEP16", "prefill tp must be >= 1"},
		{"1P1D XYZ8/DEP16", "cannot read parallelism"},
		{"1P1D DEP8/DEP16/DEP32", "unexpected"},
		{"1P1D DEP8/DEP16 TP4", "unexpected"},
		{"1P1D 2xDEP8/DEP16", "NPMD"},
		{"0xTP8 agg", "prefill workers >= 1"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseDeployment(tc.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "one-line error")
		})
	}
}

func FuzzParseDeployment(f *testing.F) {
	for _, s := range []string{"2P1D DEP16/DEP32", "TP8 agg", "1P6D DEP8/TP4", "p2x16ep16dpa_d1x32ep32dpa", "2xTEP8", "99999999999999999999P1D TP1/TP1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDeployment(s)
		if err != nil {
			return
		}
		require.NoError(t, d.Validate())
		back, err := ParseDeployment(d.String())
		require.NoError(t, err, "String() %q must parse", d.String())
		require.Equal(t, d, back)
	})
}

// checkMatrixRows parses every multinode row of the matrix files in files
// and returns how many it parsed; single-node rows are skipped.
func checkMatrixRows(t *testing.T, files []string) int {
	t.Helper()
	parsed := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".evals.json") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var rows []json.RawMessage
		require.NoError(t, json.Unmarshal(data, &rows))
		for i, raw := range rows {
			row, err := ParseMatrixRow(raw, 0)
			if err != nil && strings.Contains(err.Error(), "field prefill: missing") {
				continue // single-node row
			}
			require.NoError(t, err, "%s row %d", f, i)
			require.NoError(t, row.Deployment(4).Validate(), "%s row %d", f, i)
			parsed++
		}
	}
	return parsed
}

// TestMatrixRows reads rows of our own written in InferenceX's
// expected-matrix format (testdata/matrix-rows.json).
func TestMatrixRows(t *testing.T) {
	t.Parallel()
	const file = "testdata/matrix-rows.json"
	tests := []struct {
		index int
		dep   string
		al    float64
		hasAL bool
	}{
		{0, "1P1D DEP8/DEP8", 2.2, true},
		{1, "TP8 agg", 1.8, true},
		{2, "TP8 agg", 0, false}, // disagg: true with decode num-worker 0
		{3, "2P1D DEP4/DEP16", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.dep, func(t *testing.T) {
			row, err := LoadMatrixRow(file, tc.index)
			require.NoError(t, err)
			assert.Equal(t, tc.dep, row.Deployment(4).String())
			al, ok := row.SyntheticAcceptanceLength()
			assert.Equal(t, tc.hasAL, ok)
			assert.Equal(t, tc.al, al)
		})
	}
	_, err := LoadMatrixRow(file, 4)
	require.ErrorContains(t, err, "field [4].prefill: missing")
	assert.Equal(t, 4, checkMatrixRows(t, []string{file}), "the single-node row is skipped")
}

// TestMatrixRowsFromInferenceX reads InferenceX's own expected matrices
// (reference test).
func TestMatrixRowsFromInferenceX(t *testing.T) {
	matrixDir := filepath.Join(reftest.InferenceX(t, "expected-matrix"), "expected-matrix")
	tests := []struct {
		file  string
		index int
		dep   string
		al    float64
		hasAL bool
	}{
		{"dsv4-fp4-gb200-dynamo-vllm-agentic-mtp-disagg.json", 0, "1P1D DEP8/DEP8", 2.49, true},
		{"dsv4-fp4-gb200-dynamo-vllm-agentic-mtp-agg.json", 0, "TP8 agg", 2.49, true},
		{"dsv4-fp4-gb200-dynamo-vllm-mtp2-nosynthetic.json", 0, "TP8 agg", 0, false}, // disagg: true with decode num-worker 0
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			row, err := LoadMatrixRow(filepath.Join(matrixDir, tc.file), tc.index)
			require.NoError(t, err)
			assert.Equal(t, tc.dep, row.Deployment(4).String())
			al, ok := row.SyntheticAcceptanceLength()
			assert.Equal(t, tc.hasAL, ok)
			assert.Equal(t, tc.al, al)
		})
	}
	// every multinode row in InferenceX's expected matrices parses
	files, err := filepath.Glob(filepath.Join(matrixDir, "*.json"))
	require.NoError(t, err)
	assert.Greater(t, checkMatrixRows(t, files), 50)
}

func TestMatrixRowErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json string
		index      int
		want       string
	}{
		{"syntax", "{\n\"prefill\": {\n\"tp\": 8,,\n}}", 0, "3: invalid JSON"},
		{"type", "{\n\"prefill\": {\n\"num-worker\": 1,\n\"tp\": \"8\"}}", 0, "4: field prefill.tp: expected int"},
		{"missing decode", "{\n\"prefill\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1}\n}", 0, "field decode: missing"},
		{"zero tp", "{\"prefill\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1},\n\"decode\": {\"num-worker\": 1,\n  \"tp\": 0, \"ep\": 1}, \"disagg\": true}", 0, "3: field decode.tp: must be >= 1"},
		{"negative decode workers", "{\"prefill\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1},\n\"decode\": {\"num-worker\": -1, \"tp\": 8, \"ep\": 1},\n\"disagg\": true}", 0, "2: field decode.num-worker: must be >= 0"},
		{"bad AL", "{\"prefill\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1, \"additional-settings\": [\"SYNTHETIC_ACCEPTANCE=true\", \"SYNTHETIC_ACCEPTANCE_LENGTH=abc\"]}, \"decode\": {\"num-worker\": 0, \"tp\": 8, \"ep\": 1}}", 0, "SYNTHETIC_ACCEPTANCE_LENGTH"},
		{"array index", "[\n{\"prefill\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1}, \"decode\": {\"num-worker\": 0, \"tp\": 8, \"ep\": 1}},\n{\"prefill\": {\"num-worker\": 1,\n \"tp\": 0, \"ep\": 1}, \"decode\": {\"num-worker\": 0, \"tp\": 8, \"ep\": 1}}\n]", 1, "4: field [1].prefill.tp: must be >= 1"},
		{"array out of range", "[]", 0, "holds 0 rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "row.json")
			require.NoError(t, os.WriteFile(p, []byte(tc.json), 0o644))
			_, err := LoadMatrixRow(p, tc.index)
			require.Error(t, err)
			assert.Contains(t, err.Error(), p+":")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
