package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// TestInferenceXSchema2Examples: the four schema-2 recipes InferenceX
// committed resolve, every variant of its override file included, into
// the roles their names promise.
func TestInferenceXSchema2Examples(t *testing.T) {
	dir := filepath.Join(reftest.InferenceX(t, "schema2-examples"), "schema2-examples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 4)
	variants := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		sels, err := RecipeVariants(f, data)
		require.NoError(t, err)
		if sels == nil {
			sels = []string{""}
		} else {
			sels = append([]string{"base"}, sels...)
		}
		for _, sel := range sels {
			r, err := ParseRecipe(f, data, sel)
			require.NoError(t, err, "%s:%s", filepath.Base(f), sel)
			require.Equal(t, SchemaV2, r.Schema)
			_, err = r.Footprint(0)
			require.NoError(t, err, "%s:%s", filepath.Base(f), sel)
			variants++
		}
	}
	require.Equal(t, 3+12, variants, "three plain recipes, and base plus 11 variants")

	agentx := func(name string) *Recipe {
		return loadFile(t, filepath.Join(dir, "benchmarks__multi_node__srt-slurm-recipes__dsv4__sglang__gb200-fp4__agentx__"+name+".yaml"))
	}
	agg := agentx("agg-gb200-tp8-c1-mtp-hicache")
	require.NotNil(t, agg.Roles.Agg)
	assert.Equal(t, [3]int{2, 1, 8}, [3]int{agg.Roles.Agg.Nodes, agg.Roles.Agg.Workers, agg.Roles.Agg.GPUs}, "TP8 over two 4-GPU nodes")
	dis := agentx("disagg-gb200-1p1d-dep8-dep16-c64-mtp-kvoffload")
	assert.Equal(t, [3]int{2, 1, 8}, [3]int{dis.Roles.Prefill.Nodes, dis.Roles.Prefill.Workers, dis.Roles.Prefill.GPUs}, "DEP8 prefill")
	assert.Equal(t, [3]int{4, 1, 16}, [3]int{dis.Roles.Decode.Nodes, dis.Roles.Decode.Workers, dis.Roles.Decode.GPUs}, "DEP16 decode")
	assert.Equal(t, NodeDedicated, dis.Services.InfraNode)
	assert.Equal(t, 32, dis.Services.NATSMaxPayloadMB)
	assert.Equal(t, DynamoSource{Kind: SourceWheel, Value: "1.5.0.dev20260910"}, dis.Dynamo.Source)
}
