package loadgen

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/jsonesc"
	"github.com/sweepflow/sweepflow/sim"
)

func TestCountTokensMatchesSimulator(t *testing.T) {
	t.Parallel()
	cases := []string{"", " ", "a", " a b  c ", "x\ty\nz\r\nw", "\u00a0a\u2003b\u3000", "héllo wörld", "a\x85b", "\xff\xfe z"}
	rng := rand.New(rand.NewPCG(1, 1))
	alphabet := []string{"a", "b", " ", "\n", "\t", "\u00a0", "é", "\u2028", "\xff"}
	for i := 0; i < 500; i++ {
		var sb strings.Builder
		for j := 0; j < rng.IntN(20); j++ {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		require.Equal(t, sim.CountTokens(s), CountTokens([]byte(s)), "%q", s)
		require.Equal(t, len(bytes.Fields([]byte(s))), CountTokens([]byte(s)), "%q", s)
	}
}

func TestSampleLen(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		name   string
		l      int
		r      float64
		lo, hi int
	}{
		{"InferenceX 0.8", 1000, 0.8, 800, 1000},
		{"fixed", 1000, 1, 1000, 1000},
		{"zero ratio is [1, L]", 10, 0, 1, 10},
		{"tiny", 1, 0.8, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seenLo, seenHi := false, false
			for i := 0; i < 5000; i++ {
				n := sampleLen(rng, tc.l, tc.r)
				require.GreaterOrEqual(t, n, tc.lo)
				require.LessOrEqual(t, n, tc.hi)
				seenLo = seenLo || n == tc.lo
				seenHi = seenHi || n == tc.hi
			}
			assert.True(t, seenLo && seenHi, "both ends are reachable")
		})
	}
}

func TestAppendWordsTokenCount(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 17, 8192} {
		b := appendWords(nil, rng, n)
		assert.Equal(t, n, CountTokens(b))
		assert.Equal(t, n, sim.CountTokens(string(b)))
	}
}

func TestBodyBuilder(t *testing.T) {
	t.Parallel()
	bb, err := newBodyBuilder("deep/seek", true, map[string]any{"temperature": 0.5, "max_tokens": 7})
	require.NoError(t, err)
	body := bb.build(nil, []message{{"user", []byte("hi \"there\"\n")}, {"assistant", []byte("a\x01\xffb")}}, 99, true)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	assert.Equal(t, "deep/seek", m["model"])
	assert.Equal(t, 7.0, m["max_tokens"], "Extra overrides max_tokens and loadgen does not send its own")
	assert.Equal(t, true, m["ignore_eos"])
	assert.Equal(t, 0.5, m["temperature"])
	assert.Equal(t, map[string]any{"include_usage": true}, m["stream_options"])
	msgs := m["messages"].([]any)
	assert.Equal(t, "hi \"there\"\n", msgs[0].(map[string]any)["content"])
	assert.Equal(t, "a\x01\uFFFDb", msgs[1].(map[string]any)["content"])

	cb, err := newBodyBuilder("m", false, nil)
	require.NoError(t, err)
	body = cb.build(nil, []message{{"user", []byte("one two")}}, 5, false)
	require.NoError(t, json.Unmarshal(body, &m))
	assert.Equal(t, "one two", m["prompt"])
	assert.Equal(t, 5.0, m["max_tokens"])
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f", "é😀", "\xff\xfe", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, []byte(s))
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("invalid JSON %q for %q: %v", out, s, err)
		}
		want, _ := json.Marshal(s)
		var std string
		_ = json.Unmarshal(want, &std)
		if got != std {
			t.Fatalf("round trip of %q: got %q want %q", s, got, std)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("valid UTF-8 changed: %q -> %q", s, got)
		}
	})
}

// openUser, the escaped text, then closeUser is build's body for one user
// message, for both endpoints and with extra fields.
func TestOpenUserCloseUserMatchesBuild(t *testing.T) {
	t.Parallel()
	text := []byte("plain words \"quoted\" back\\slash\nnew\tline \x01 é \xff")
	for _, chat := range []bool{true, false} {
		for _, extra := range []map[string]any{nil, {"temperature": 0.2, "ignore_eos": false}} {
			bb, err := newBodyBuilder("m", chat, extra)
			require.NoError(t, err)
			want := bb.build(nil, []message{{role: "user", content: text}}, 77, true)
			got := bb.openUser(nil)
			got = jsonesc.AppendBytes(got, text)
			got = bb.closeUser(got, 77, true)
			assert.Equal(t, string(want), string(got), "chat %v extra %v", chat, extra)
			assert.True(t, json.Valid(got))
		}
	}
}
