package loadgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixture = "testdata/agentx-small.jsonl"

func TestParseTraceFixture(t *testing.T) {
	t.Parallel()
	tr, err := LoadTrace(fixture)
	require.NoError(t, err)
	require.Len(t, tr, 2)
	a := tr[0]
	assert.Equal(t, "fx-0001", a.ID)
	assert.Equal(t, []string{"claude-opus-4-5-20251101", "claude-haiku-4-5-20251001"}, a.Models)
	assert.Equal(t, 64, a.BlockSize)
	assert.Equal(t, "local", a.HashIDScope)
	assert.Equal(t, 3000, a.SystemTokens+a.ToolTokens)
	require.Len(t, a.Requests, 6)
	r1 := a.Requests[1]
	assert.Equal(t, Request{T: 8, Type: "s", Model: "claude-opus-4-5-20251101", In: 3700, Out: 450, HashIDs: r1.HashIDs, APITime: 7.9}, r1)
	assert.Len(t, r1.HashIDs, 58, "ceil(3700/64) blocks")
	assert.Equal(t, a.Requests[0].HashIDs, r1.HashIDs[:50], "the call resends the previous prompt")
	sub := a.Requests[2]
	assert.Equal(t, ReqSubagent, sub.Type)
	assert.False(t, sub.IsCall())
	require.Len(t, sub.Requests, 2)
	assert.Equal(t, "claude-haiku-4-5-20251001", sub.Requests[0].Model)
	assert.Equal(t, "n", tr[1].Requests[0].Type)

	// JSONL, one pretty-printed object and an array all parse alike.
	var buf bytes.Buffer
	require.NoError(t, WriteTrace(&buf, tr))
	back, err := ParseTrace(&buf, "rt.jsonl")
	require.NoError(t, err)
	assert.Equal(t, tr, back)
	arr := "[\n" + strings.Join(strings.Split(strings.TrimSpace(readFile(t, fixture)), "\n"), ",\n") + "\n]"
	back, err = ParseTrace(strings.NewReader(arr), "arr.json")
	require.NoError(t, err)
	assert.Equal(t, tr, back)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestParseTraceErrors(t *testing.T) {
	t.Parallel()
	call := `{"t":0,"type":"n","model":"m","in":100,"out":5,"hash_ids":[0,1],"api_time":1}`
	trace := func(fields, reqs string) string {
		if fields != "" {
			fields = "," + fields
		}
		return `{"id":"a","block_size":64,"hash_id_scope":"local"` + fields + `,"requests":[` + reqs + `]}`
	}
	ok := trace("", call)
	cases := []struct {
		name, in, want string
	}{
		{"bad json", ok + "\n{", "t.jsonl:2: unexpected EOF"},
		{"wrong type", trace("", `{"t":0,"type":"n","in":"ten","out":5}`), "t.jsonl:1: field requests.in: expected int, got JSON string"},
		{"wrong type on a later line", "[\n" + ok + ",\n" + trace("", `{"t":0,"type":"n","in":1,"out":"x"}`) + "\n]", "t.jsonl:3: field requests.out: expected int"},
		{"pretty-printed line", "{\n \"id\": \"a\",\n \"block_size\": \"64\"\n}", "t.jsonl:3: field block_size: expected int"},
		{"not an object", `"x"`, "t.jsonl:1: want a trace object"},
		{"missing id", strings.Replace(ok, `"id":"a"`, `"id":""`, 1), "t.jsonl:1: field id: missing or empty"},
		{"duplicate id", ok + "\n\n" + ok, `t.jsonl:3: field id: "a" already used on line 1`},
		{"no block size", strings.Replace(ok, `"block_size":64`, `"block_size":0`, 1), "t.jsonl:1: field block_size: must be > 0 (got 0)"},
		{"bad scope", strings.Replace(ok, `"local"`, `"session"`, 1), `t.jsonl:1: field hash_id_scope: want "local" or "global" (got "session")`},
		{"no requests", trace("", ""), `t.jsonl:1: field requests: trace "a" has no requests`},
		{"only subagents", trace("", `{"type":"subagent","requests":[`+call+`]}`), `t.jsonl:1: field requests: trace "a" has no main-agent call`},
		{"missing type", trace("", call+`,{"t":1,"in":1,"out":1}`), `t.jsonl:1: field requests[1].type: missing`},
		{"unknown type", trace("", strings.Replace(call, `"n"`, `"x"`, 1)), `t.jsonl:1: field requests[0].type: want "n", "s" or "subagent" (got "x")`},
		{"time goes back", trace("", strings.Replace(call, `"t":0`, `"t":5`, 1)+","+call), "t.jsonl:1: field requests[1].t: 0 is before the previous request's 5"},
		{"negative time", trace("", strings.Replace(call, `"t":0`, `"t":-1`, 1)), "t.jsonl:1: field requests[0].t: must be a time >= 0"},
		{"zero in", trace("", strings.Replace(call, `"in":100`, `"in":0`, 1)), "t.jsonl:1: field requests[0].in: must be > 0 (got 0)"},
		{"zero out", trace("", strings.Replace(call, `"out":5`, `"out":0`, 1)), "t.jsonl:1: field requests[0].out: must be > 0 (got 0)"},
		{"negative api time", trace("", strings.Replace(call, `"api_time":1`, `"api_time":-1`, 1)), "t.jsonl:1: field requests[0].api_time: must be >= 0"},
		{"too many blocks", trace("", strings.Replace(call, `[0,1]`, `[0,1,2]`, 1)), "t.jsonl:1: field requests[0].hash_ids: 3 blocks of 64 tokens exceed in=100 (at most 2)"},
		{"negative hash id", trace("", strings.Replace(call, `[0,1]`, `[0,-1]`, 1)), "t.jsonl:1: field requests[0].hash_ids[1]: must be >= 0"},
		{"empty subagent", trace("", call+`,{"type":"subagent","requests":[]}`), "t.jsonl:1: field requests[1].requests: subagent has no requests"},
		{"bad subagent call", trace("", call+`,{"type":"subagent","requests":[`+strings.Replace(call, `"out":5`, `"out":0`, 1)+`]}`), "t.jsonl:1: field requests[1].requests[0].out: must be > 0"},
		{"empty", "\n\n", "t.jsonl: no traces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tc.in), "t.jsonl")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "one-line error")
		})
	}
}

func TestGenerateTraceDeterministicAndRoundTrips(t *testing.T) {
	t.Parallel()
	a := GenerateTrace(42, 3, TraceShape{})
	assert.Equal(t, a, GenerateTrace(42, 3, TraceShape{}))
	assert.NotEqual(t, a, GenerateTrace(43, 3, TraceShape{}))
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	var buf bytes.Buffer
	require.NoError(t, WriteTrace(&buf, a))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	back, err := LoadTrace(path)
	require.NoError(t, err, "generated traces pass the corpus validation")
	assert.Equal(t, a, back)
}

// The default workload follows the corpus's shape: big, mostly reused
// main-agent prompts, replies of a few hundred to ~2,000 tokens, and short
// subagent calls.
func TestDefaultTraceShape(t *testing.T) {
	t.Parallel()
	s := Stats(DefaultTrace(1))
	t.Log("\n" + s.String())
	require.Equal(t, DefaultTraceCount, s.Traces)
	cases := []struct {
		name    string
		got     float64
		lo, hi  float64
		comment string
	}{
		{"main input median", s.MainIn.Median, 20_000, 90_000, "tens of thousands of tokens"},
		{"main input p90", s.MainIn.P90, 40_000, 100_000, "contexts grow toward compaction"},
		{"main prefix reuse", s.MainReuse, 0.8, 1, "a call mostly resends its session's prefix"},
		{"main output p10-ish (min)", minOut(DefaultTrace(1)), 300, 400, "a few hundred at least"},
		{"main output median", s.MainOut.Median, 900, 1400, ""},
		{"main output p99", s.MainOut.P99, 1800, 2000, "up to about 2,000"},
		{"subagent share", float64(s.SubagentCalls) / float64(s.MainCalls+s.SubagentCalls), 0.1, 0.5, ""},
		{"subagent input median", s.SubIn.Median, 1_000, 10_000, "short subagent calls"},
		{"subagent output p99", s.SubOut.P99, 40, 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.GreaterOrEqual(t, tc.got, tc.lo, tc.comment)
			assert.LessOrEqual(t, tc.got, tc.hi, tc.comment)
		})
	}
}

func minOut(tr []Trace) float64 {
	m := 1e18
	for _, t := range tr {
		for _, r := range t.Requests {
			if r.IsCall() {
				m = min(m, float64(r.Out))
			}
		}
	}
	return m
}
