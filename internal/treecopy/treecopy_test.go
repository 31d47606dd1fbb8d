package treecopy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCopy(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b", "x.yaml"), []byte("x: 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "y.txt"), []byte("y"), 0o644))
	dst := filepath.Join(t.TempDir(), "copy")
	var seen []string
	require.NoError(t, Copy(src, dst, func(rel string, data []byte) ([]byte, error) {
		seen = append(seen, rel)
		return bytes.ToUpper(data), nil
	}))
	require.ElementsMatch(t, []string{"a/b/x.yaml", "y.txt"}, seen)
	got, err := os.ReadFile(filepath.Join(dst, "a", "b", "x.yaml"))
	require.NoError(t, err)
	require.Equal(t, "X: 1\n", string(got))
	require.NoError(t, Copy(src, filepath.Join(t.TempDir(), "plain"), nil))
}
