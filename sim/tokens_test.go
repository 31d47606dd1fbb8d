package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"one", 1},
		{"Question: how many?\nAnswer:", 4},
		{"  leading and trailing  ", 3},
		{"Janet’s ducks lay 16 eggs", 5},
		{"no\u00a0break\u2003em", 3}, // unicode spaces separate, like strings.Fields
		{"[rid:0123456789ab] hello", 2},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, CountTokens(tc.in), "%q", tc.in)
		assert.Equal(t, len(strings.Fields(tc.in)), CountTokens(tc.in), "matches strings.Fields for %q", tc.in)
	}
}

func TestSplitTokens(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"So", " the", " total", "\n####", " 18"}, splitTokens("So the total\n#### 18"))
	assert.Equal(t, []string{"  a", " b  "}, splitTokens("  a b  "))
	assert.Empty(t, splitTokens("  "))
}

func FuzzSplitTokens(f *testing.F) {
	for _, s := range []string{"", "a", " a b ", "x\n#### 12", "Janet’s\u00a0ducks", "\xff\xfe bad utf8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pieces := splitTokens(s)
		require.Equal(t, CountTokens(s), len(pieces))
		for _, p := range pieces {
			require.Equal(t, 1, CountTokens(p), "piece %q", p)
		}
		if len(pieces) > 0 {
			require.Equal(t, s, strings.Join(pieces, ""))
		}
	})
}

func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "nl\n\r\t\x01", "Janet’s", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := append([]byte{'"'}, appendEscaped(nil, s)...)
		enc = append(enc, '"')
		var got string
		require.NoError(t, json.Unmarshal(enc, &got), "%q", enc)
		want, _ := json.Marshal(s) // encoding/json also replaces invalid UTF-8 with U+FFFD
		var wantS string
		require.NoError(t, json.Unmarshal(want, &wantS))
		require.Equal(t, wantS, got)
	})
}

func TestPrefixHasherPages(t *testing.T) {
	t.Parallel()
	pages := func(parts ...string) []uint64 {
		h := newPrefixHasher(4)
		for i, p := range parts {
			if i%2 == 0 {
				h.mark(p)
			} else {
				h.text(p)
			}
		}
		return h.finish()
	}
	a := pages("user", "a b c d e f g h i")
	b := pages("user", "a b c d e f g h j k l m")
	require.Len(t, a, 2, "9 tokens make 2 whole pages of 4")
	require.Len(t, b, 3)
	assert.Equal(t, a, b[:2], "shared prefix, shared pages")
	c := pages("system", "a b c d e f g h")
	assert.NotEqual(t, a[0], c[0], "the role is part of the prefix")
	d := pages("user", "a b c d", "user", "e f g h")
	assert.Equal(t, a[0], d[0], "a page ends with its last token")
	assert.NotEqual(t, a[1], d[1], "a message boundary changes later pages")
}
