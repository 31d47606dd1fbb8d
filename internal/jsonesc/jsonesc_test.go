package jsonesc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendMatchesEncodingJSON(t *testing.T) {
	tests := []string{"", "plain words", `quote " and \ backslash`, "new\nline\ttab\rcr", "\x00\x01\x1f", "héllo wörld 漢字", "bad \xff utf8", "<html> & 'x'"}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			got := append([]byte{'"'}, Append(nil, s)...)
			got = append(got, '"')
			var back string
			require.NoError(t, json.Unmarshal(got, &back), "%q", got)
			want := string([]rune(s)) // invalid bytes become U+FFFD, as encoding/json does
			require.Equal(t, want, back)
			require.Equal(t, Append(nil, s), AppendBytes(nil, []byte(s)))
		})
	}
}

func FuzzAppend(f *testing.F) {
	f.Add("hello \"world\"\n\xff")
	f.Fuzz(func(t *testing.T, s string) {
		enc := append([]byte{'"'}, Append(nil, s)...)
		enc = append(enc, '"')
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("invalid JSON %q: %v", enc, err)
		}
		if back != string([]rune(s)) {
			t.Fatalf("round trip %q -> %q", s, back)
		}
	})
}
