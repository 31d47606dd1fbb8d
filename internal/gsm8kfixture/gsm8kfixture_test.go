package gsm8kfixture

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The generated problems must be well-formed GSM8K lines whose "#### N"
// answer is the arithmetic the worked solution states, and distinct.
func TestWriteIsValidGSM8K(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Write(dir, 300, 40))
	for split, n := range map[string]int{"test": 300, "train": 40} {
		f, err := os.Open(filepath.Join(dir, split+".jsonl"))
		require.NoError(t, err)
		seen := map[string]bool{}
		sc := bufio.NewScanner(f)
		lines := 0
		for sc.Scan() {
			lines++
			var d struct{ Question, Answer string }
			require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
			require.False(t, seen[d.Question], "duplicate question %q", d.Question)
			seen[d.Question] = true
			i := strings.LastIndex(d.Answer, "#### ")
			require.Positive(t, i, d.Answer)
			gold, err := strconv.Atoi(d.Answer[i+5:])
			require.NoError(t, err)
			// The last calculator annotation <<expr=R>> carries the result.
			j := strings.LastIndex(d.Answer, "=")
			k := strings.LastIndex(d.Answer, ">>")
			got, err := strconv.Atoi(d.Answer[j+1 : k])
			require.NoError(t, err, d.Answer)
			require.Equal(t, gold, got, d.Answer)
		}
		require.NoError(t, f.Close())
		require.Equal(t, n, lines, split)
	}
}
