package loadgen

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTraceErrors(t *testing.T) {
	t.Parallel()
	ok := `{"session_id":"s1","turns":[{"input_tokens":10,"output_tokens":5,"delay_ms":0}]}`
	cases := []struct {
		name, in, want string
	}{
		{"bad json", ok + "\n{", "t.jsonl:2: unexpected EOF"},
		{"wrong type", `{"session_id":"s1","turns":[{"input_tokens":"ten","output_tokens":5}]}`, "t.jsonl:1: field turns.input_tokens: expected int, got JSON string"},
		{"unknown field", `{"session_id":"s1","turns":[],"foo":1}`, `t.jsonl:1: json: unknown field "foo"`},
		{"missing id", `{"turns":[{"input_tokens":1,"output_tokens":1}]}`, "t.jsonl:1: field session_id: missing or empty"},
		{"duplicate id", ok + "\n\n" + ok, `t.jsonl:3: field session_id: "s1" already used on line 1`},
		{"no turns", `{"session_id":"s1","turns":[]}`, "t.jsonl:1: field turns: session \"s1\" has no turns"},
		{"zero input", `{"session_id":"s1","turns":[{"input_tokens":1,"output_tokens":1},{"input_tokens":0,"output_tokens":1}]}`, "t.jsonl:1: field turns[1].input_tokens: must be > 0 (got 0)"},
		{"zero output", `{"session_id":"s1","turns":[{"input_tokens":1,"output_tokens":0}]}`, "t.jsonl:1: field turns[0].output_tokens: must be > 0"},
		{"negative delay", `{"session_id":"s1","turns":[{"input_tokens":1,"output_tokens":1,"delay_ms":-1}]}`, "t.jsonl:1: field turns[0].delay_ms: must be >= 0"},
		{"empty", "\n\n", "t.jsonl: no sessions"},
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
	a := GenerateTrace(42, 5, 4, TraceShape{})
	b := GenerateTrace(42, 5, 4, TraceShape{})
	c := GenerateTrace(43, 5, 4, TraceShape{})
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	require.Len(t, a, 5)
	for _, s := range a {
		require.Len(t, s.Turns, 4)
		assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, s.Turns[0].HashIDs, "shared system prompt")
		assert.Equal(t, 2048, s.Turns[0].InputTokens)
		assert.Zero(t, s.Turns[0].DelayMs)
		for _, tr := range s.Turns[1:] {
			assert.GreaterOrEqual(t, tr.InputTokens, 64)
			assert.LessOrEqual(t, tr.InputTokens, 256)
			assert.LessOrEqual(t, tr.DelayMs, 2000.0)
		}
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	var buf bytes.Buffer
	require.NoError(t, WriteTrace(&buf, a))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	back, err := LoadTrace(path)
	require.NoError(t, err)
	assert.Equal(t, a, back)
}

func TestTurnInput(t *testing.T) {
	t.Parallel()
	turn := Turn{InputTokens: 200, OutputTokens: 5, HashIDs: []int64{1, 2}}
	a, na, sa := turnInput(nil, turn, true, "[rid:aaaaaaaaaaaa]", rand.New(rand.NewPCG(1, 1)))
	b, nb, sb := turnInput(nil, turn, true, "[rid:bbbbbbbbbbbb]", rand.New(rand.NewPCG(2, 2)))
	assert.Equal(t, 200, na)
	assert.Equal(t, 200, nb)
	assert.Equal(t, 200, CountTokens(a))
	assert.Equal(t, 128, sa)
	assert.Equal(t, 128, sb)
	wa, wb := strings.Fields(string(a)), strings.Fields(string(b))
	assert.Equal(t, wa[:128], wb[:128], "same hash ids give the same leading blocks")
	assert.Equal(t, "[rid:aaaaaaaaaaaa]", wa[128], "the marker follows the shared blocks")
	assert.NotEqual(t, wa[129:], wb[129:])

	later, n, shared := turnInput(nil, Turn{InputTokens: 30, OutputTokens: 1}, false, "[rid:x]", rand.New(rand.NewPCG(1, 1)))
	assert.Equal(t, 30, n)
	assert.Zero(t, shared)
	assert.NotContains(t, string(later), "[rid:")
	// A hash block that does not fit is dropped rather than overflowing.
	small, n, shared := turnInput(nil, Turn{InputTokens: 70, OutputTokens: 1, HashIDs: []int64{1, 2}}, true, "[rid:y]", rand.New(rand.NewPCG(1, 1)))
	assert.Equal(t, 70, n)
	assert.Equal(t, 64, shared)
	assert.Equal(t, 70, CountTokens(small))
}
