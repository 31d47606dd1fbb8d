package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrite: the file is replaced whole, in a directory created for it,
// and a failed fill leaves the old content and no temporary file.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "f.json")
	require.NoError(t, WriteFile(path, []byte("one\n")))
	require.NoError(t, WriteFile(path, []byte("two\n")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	boom := errors.New("boom")
	err = Write(path, func(f *os.File) error {
		_, _ = f.WriteString("partial")
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, _ = os.ReadFile(path)
	assert.Equal(t, "two\n", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left behind")
}
