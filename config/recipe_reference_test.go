package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

// canonicalDiff says where two canonical recipes first differ ("" when equal).
func canonicalDiff(a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-120)
	return "v1: ..." + string(a[from:min(len(a), i+80)]) + "\nv2: ..." + string(b[from:min(len(b), i+80)])
}

func loadFile(t *testing.T, path string, sets ...string) *Recipe {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := ParseRecipe(path, data, "", sets...)
	require.NoError(t, err)
	return r
}

// TestSchema2ConversionsResolveEqual: every recipe srt-slurm's own migration
// converted to schema 2 (srt-slurm 2.x's `srtctl migrate`, run unchanged)
// resolves to the recipe its schema-1 original resolves to: the 38 fleet
// recipes and the nine seed and backends recipes.
func TestSchema2ConversionsResolveEqual(t *testing.T) {
	root := reftest.SrtSlurm(t, "rendered-fleet", "schema2-seed")
	n := 0
	for _, dir := range []string{"rendered-fleet", "schema2-seed"} {
		v2s, err := filepath.Glob(filepath.Join(root, dir, "*.recipe.v2.yaml"))
		require.NoError(t, err)
		for _, v2 := range v2s {
			v1 := strings.TrimSuffix(v2, ".v2.yaml") + ".yaml"
			t.Run(dir+"/"+filepath.Base(v1), func(t *testing.T) {
				a, b := loadFile(t, v1), loadFile(t, v2)
				require.Equal(t, SchemaV1, a.Schema)
				require.Equal(t, SchemaV2, b.Schema)
				if d := canonicalDiff(a.Canonical(), b.Canonical()); d != "" {
					t.Fatalf("%s and its schema-2 conversion resolve differently:\n%s", filepath.Base(v1), d)
				}
				require.Equal(t, a.ResolvedDigest(), b.ResolvedDigest())
			})
			n++
		}
	}
	require.Equal(t, 38+9, n, "the fleet's 38 conversions and the seed's nine")
}

// TestMigrateMatchesSrtSlurm: sweepflow's own migration of each schema-1
// recipe resolves to what srt-slurm's conversion (and the original)
// resolves to.
func TestMigrateMatchesSrtSlurm(t *testing.T) {
	root := reftest.SrtSlurm(t, "rendered-fleet", "schema2-seed")
	n := 0
	for _, dir := range []string{"rendered-fleet", "schema2-seed"} {
		v2s, err := filepath.Glob(filepath.Join(root, dir, "*.recipe.v2.yaml"))
		require.NoError(t, err)
		for _, v2 := range v2s {
			v1 := strings.TrimSuffix(v2, ".v2.yaml") + ".yaml"
			t.Run(dir+"/"+filepath.Base(v1), func(t *testing.T) {
				data, err := os.ReadFile(v1)
				require.NoError(t, err)
				out, err := MigrateRecipe(v1, data)
				require.NoError(t, err)
				ours, err := ParseRecipe("migrated "+filepath.Base(v1), out, "")
				require.NoError(t, err, "%s", out)
				require.Equal(t, SchemaV2, ours.Schema)
				if d := canonicalDiff(loadFile(t, v2).Canonical(), ours.Canonical()); d != "" {
					t.Fatalf("our migration of %s resolves differently from srt-slurm's:\n%s\n%s", filepath.Base(v1), d, out)
				}
			})
			n++
		}
	}
	require.Equal(t, 38+9, n)
}
