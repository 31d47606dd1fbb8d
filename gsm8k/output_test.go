package gsm8k

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEvalRecord(t *testing.T) {
	t.Parallel()
	s := Summary{Task: "gsm8k", Mode: ModeInferenceX, EMStrict: 0.95, EMStrictSE: 0.006, EMFlexible: 0.96,
		EMFlexibleSE: 0.005, NEff: 1319, InvalidRate: 0.01, FailedRequests: 2}
	id := map[string]any{"model_prefix": "dsv4", "hw": "gb200", "conc": 64, "em_strict": "spoofed"}
	v := Gate(s, 0.91)
	b, err := json.Marshal(EvalRecord(s, id, true, &v))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	for k, want := range map[string]any{
		"task": "gsm8k", "em_strict": 0.95, "em_strict_se": 0.006, "em_flexible": 0.96, "em_flexible_se": 0.005,
		"n_eff": 1319.0, "score": 0.95, "score_name": "em_strict", "score_se": 0.006,
		"model_prefix": "dsv4", "hw": "gb200", "conc": 64.0, "simulated": true, "failed_requests": 2.0,
		"mode": "inferencex", "invalid_rate": 0.01,
	} {
		assert.Equal(t, want, got[k], k)
	}
	gate := got["gate"].(map[string]any)
	assert.Equal(t, true, gate["passed"])
	assert.Equal(t, 0.91, gate["floor"])

	plain := EvalRecord(s, map[string]any{"simulated": true}, false, nil)
	assert.NotContains(t, plain, "simulated", "only the server decides simulated")
	assert.NotContains(t, plain, "gate")
}

func TestRescoreJSONL(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"doc_id": 0, "response": "She makes $18.\n#### 18", "gold": "Janet sells 9 eggs.\n#### 18"}`,
		`{"doc_id": 1, "response": "#### 7\n#### 3", "gold": "#### 3"}`,
		``,
		`{"doc_id": 2, "response": "no idea", "gold": "#### 1,000"}`,
		`{"doc_id": 3, "response": "", "gold": "#### 5", "error": "HTTP 500"}`,
	}, "\n")
	cases := []struct {
		mode   Mode
		strict float64
	}{
		{ModeLMEval, 1.0 / 3},     // doc 1's first #### is 7
		{ModeInferenceX, 2.0 / 3}, // doc 1's last #### is 3
	}
	for _, tc := range cases {
		out, err := RescoreJSONL(strings.NewReader(in), "in.jsonl", tc.mode)
		require.NoError(t, err)
		assert.InDelta(t, tc.strict, out.Summary.EMStrict, 1e-12, tc.mode)
		assert.InDelta(t, 2.0/3, out.Summary.EMFlexible, 1e-12, tc.mode)
		assert.Equal(t, 3, out.Summary.NEff)
		assert.Equal(t, 1, out.Full.FailedRequests)
		require.Len(t, out.Samples, 3)
		assert.Equal(t, Invalid, out.Samples[2].StrictExtracted)
		b, err := json.Marshal(out)
		require.NoError(t, err)
		assert.JSONEq(t, `{"em_strict": `+jsonNum(out.Summary.EMStrict)+`, "em_flexible": `+jsonNum(out.Summary.EMFlexible)+`, "n_eff": 3}`,
			string(mustField(t, b, "summary")))
		assert.Contains(t, string(b), `"samples":[{"doc_id":0,"strict_extracted":"18","flexible_extracted":"18","strict_match":true,"flexible_match":true}`)
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

func mustField(t *testing.T, b []byte, k string) json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	return m[k]
}

func TestRescoreJSONLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"bad json", `{"doc_id": 0, "response": "x", "gold": "1"}` + "\nnope", "in.jsonl:2: invalid JSON"},
		{"no doc id", `{"response": "x", "gold": "1"}`, "in.jsonl:1: field doc_id: missing"},
		{"no gold", `{"doc_id": 0, "response": "x"}`, "in.jsonl:1: field gold: missing"},
		{"no response", `{"doc_id": 0, "gold": "1"}`, "in.jsonl:1: field response: missing"},
		{"doc id not int", `{"doc_id": "a", "response": "x", "gold": "1"}`, "in.jsonl:1: invalid JSON"},
	}
	for _, tc := range cases {
		_, err := RescoreJSONL(strings.NewReader(tc.in), "in.jsonl", ModeLMEval)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
}

func TestSummarizeStderr(t *testing.T) {
	t.Parallel()
	mk := func(n, hits int) []Sample {
		ss := make([]Sample, n)
		for i := range ss {
			ss[i].Matches = Matches{Strict: i < hits, Flexible: true}
			ss[i].Extractions = Extractions{Strict: "1", Flexible: "1"}
		}
		return ss
	}
	s := Summarize(ModeLMEval, mk(1319, 1253))
	assert.InDelta(t, 1253.0/1319, s.EMStrict, 1e-15)
	assert.InDelta(t, 0.00600, s.EMStrictSE, 5e-5) // benchmarks.md: about 0.006 at p=0.95
	assert.Zero(t, s.EMFlexibleSE)
	one := Summarize(ModeLMEval, mk(1, 1))
	assert.Equal(t, 1.0, one.EMStrict)
	assert.Zero(t, one.EMStrictSE)
	none := Summarize(ModeLMEval, nil)
	assert.Zero(t, none.NEff)
}
