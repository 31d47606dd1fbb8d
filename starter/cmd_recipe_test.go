package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecipeMigrate: the seed's recipe migrates to schema 2, the result
// resolves to the original (--check exits 0) and an edit does not (exit 1,
// naming the part that differs).
func TestRecipeMigrate(t *testing.T) {
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.yaml")
	src, err := os.ReadFile(seedAgg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(v1, src, 0o644))

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runIO([]string{"recipe", "migrate", v1}, &stdout, &stderr), stderr.String())
	v2 := stdout.String()
	assert.True(t, strings.HasPrefix(v2, "schema: 2\n"), v2)
	assert.Contains(t, v2, "roles:")
	assert.NotContains(t, v2, "aggregated_environment")
	v2File := filepath.Join(dir, "v2.yaml")
	require.NoError(t, os.WriteFile(v2File, []byte(v2), 0o644))

	stdout.Reset()
	require.Equal(t, 0, runIO([]string{"recipe", "migrate", "--check", v1, v2File}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "same: "+v1+" and "+v2File+" resolve to one recipe")

	edited := filepath.Join(dir, "edited.yaml")
	require.NoError(t, os.WriteFile(edited, []byte(strings.Replace(v2, "mem-fraction-static: 0.85", "mem-fraction-static: 0.8", 1)), 0o644))
	stdout.Reset()
	assert.Equal(t, 1, runIO([]string{"recipe", "migrate", "--check", v1, edited}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "differ: "+v1+" and "+edited+": roles.agg.args:")

	require.Equal(t, 0, runIO([]string{"recipe", "migrate", "--in-place", v1}, &stdout, &stderr), stderr.String())
	got, err := os.ReadFile(v1)
	require.NoError(t, err)
	assert.Equal(t, v2, string(got))

	assert.Equal(t, 2, runIO([]string{"recipe", "migrate", "--check", v1}, &stdout, &stderr), "--check takes two files")
}
