package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree writes files (path -> content) under dir.
func tree(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for p, body := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte(body), 0o644))
	}
	return dir
}

func read(t *testing.T, root *Root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root.Dir, filepath.FromSlash(p)))
	require.NoError(t, err, p)
	return string(b)
}

func exists(root *Root, p string) bool {
	_, err := os.Stat(filepath.Join(root.Dir, filepath.FromSlash(p)))
	return err == nil
}

// checkouts: an srt-slurm 1.x checkout and an InferenceX checkout of the
// launcher-copies layout, with files in both trees at the same places.
func checkouts(t *testing.T) (ix, srt string) {
	dir := t.TempDir()
	srt = tree(t, filepath.Join(dir, "srt-slurm"), map[string]string{
		"recipes/vllm/deepseek-v4/agentic/a.yaml": "srt a",   // InferenceX has one too: InferenceX's wins
		"recipes/vllm/deepseek-v4/agentic/s.yaml": "srt s",   // only srt-slurm's: kept beside the copy
		"recipes/sglang/qwen3.5/gb200-fp8/x.yaml": "srt x",   // a dir only a non-agentic arm copies
		"recipes/gb200-fp8/8k1k/low-latency.yaml": "srt ll",  // never copied over
		"configs/install-torchao.sh":              "echo hi", // setup scripts stay
		"src/srtctl/cli/submit.py":                "code",    // not a recipe: not taken
	})
	ix = tree(t, filepath.Join(dir, "InferenceX"), map[string]string{
		RecipesDir + "/vllm/deepseek-v4/agentic/a.yaml":              "ix a",
		RecipesDir + "/vllm/deepseek-v4/8k1k/b.yaml":                 "ix b",
		RecipesDir + "/sglang/qwen3.5/gb200-fp8/x.yaml":              "ix x",
		RecipesDir + "/sglang/qwen3.5/gb200-fp4/agentic/q.yaml":      "ix q",
		RecipesDir + "/trtllm/deepseek-v4/agentx/t.yaml":             "ix t",
		RecipesDir + "/gb200-fp8/8k1k/low-latency.yaml":              "ix ll", // no launcher copies this dir
		RecipesDir + "/configs/kimik3-dspark-config-compat.sh":       "ix cfg",
		RecipesDir + "/vllm/deepseek-v4/agentic/power.yaml":          "telemetry:\n  provider: dcgm-power\n  enabled: true\nname: p\n",
		RecipesDir + "/sglang/deepseek-v4/8k1k/power.yaml":           "telemetry:\n  provider: dcgm-power\n  enabled: true\n",
		RecipesDir + "/sglang/deepseek-v4/8k1k/power-off.yaml":       "telemetry:\n  provider: dcgm-power\n  enabled: false\n",
		RecipesDir + "/sglang/deepseek-v4/8k1k/power-elsewhere.yaml": "telemetry:\n  provider: dcgm-power\nother:\n  enabled: true\n",
	})
	return ix, srt
}

// TestComposeLikeTheLaunchers: the composed root holds what the launchers'
// `cp -rT`s produce: InferenceX's file where a launcher copies its
// directory (over srt-slurm's), srt-slurm's everywhere else, GB300's
// trtllm/deepseek-v4 under benchmarks/multi_node/srt-slurm-recipes, and
// nothing of InferenceX's a launcher does not copy.
func TestComposeLikeTheLaunchers(t *testing.T) {
	ix, srt := checkouts(t)
	cache := t.TempDir()
	r, err := Compose(ix, srt, cache)
	require.NoError(t, err)
	assert.Equal(t, LauncherCopies, r.Layout)

	assert.Equal(t, "ix a", read(t, r, "recipes/vllm/deepseek-v4/agentic/a.yaml"), "InferenceX's file wins in a copied directory")
	assert.Equal(t, "srt s", read(t, r, "recipes/vllm/deepseek-v4/agentic/s.yaml"), "cp -rT keeps srt-slurm's other files")
	assert.Equal(t, "ix b", read(t, r, "recipes/vllm/deepseek-v4/8k1k/b.yaml"))
	assert.Equal(t, "ix x", read(t, r, "recipes/sglang/qwen3.5/gb200-fp8/x.yaml"))
	assert.Equal(t, "ix t", read(t, r, RecipesDir+"/trtllm/deepseek-v4/agentx/t.yaml"), "GB300's trtllm copy lands beside, not in, recipes/")
	assert.False(t, exists(r, "recipes/trtllm/deepseek-v4/agentx/t.yaml"))
	assert.Equal(t, "srt ll", read(t, r, "recipes/gb200-fp8/8k1k/low-latency.yaml"), "a directory no launcher copies stays srt-slurm's")
	assert.Equal(t, "echo hi", read(t, r, "configs/install-torchao.sh"))
	assert.False(t, exists(r, "configs/kimik3-dspark-config-compat.sh"), "the old launchers copy no configs/")
	assert.False(t, exists(r, "src/srtctl/cli/submit.py"))

	// The same checkouts give the same directory; a changed file another.
	again, err := Compose(ix, srt, cache)
	require.NoError(t, err)
	assert.Equal(t, r.Dir, again.Dir)
	o, ok := Open(r.Dir)
	require.True(t, ok)
	assert.Equal(t, ix, o.InferenceX)
	assert.Equal(t, srt, o.SrtSlurm)
	tree(t, ix, map[string]string{RecipesDir + "/vllm/deepseek-v4/agentic/a.yaml": "ix a v2"})
	changed, err := Compose(ix, srt, cache)
	require.NoError(t, err)
	assert.NotEqual(t, r.Dir, changed.Dir)
	assert.Equal(t, "ix a", read(t, r, "recipes/vllm/deepseek-v4/agentic/a.yaml"), "a composed root is never rewritten")
	assert.Equal(t, "ix a v2", read(t, changed, "recipes/vllm/deepseek-v4/agentic/a.yaml"))

	_, ok = Open(srt)
	assert.False(t, ok, "a plain directory is no composed root")
	_, err = Compose(ix, "", cache)
	require.ErrorContains(t, err, "name that checkout too")
	_, err = Compose(srt, srt, cache)
	require.ErrorContains(t, err, "is not an InferenceX checkout")
}

// TestComposePinnedTree: from InferenceX PR #3086 on the checkout pins
// srt-slurm (utils/srt-slurm, 2.x: no recipes/) and every key gets the whole
// tree, under recipes/ and linked at benchmarks/multi_node/srt-slurm-recipes,
// its configs/ in configs/. --inferencex alone suffices.
func TestComposePinnedTree(t *testing.T) {
	dir := t.TempDir()
	ix := tree(t, dir, map[string]string{
		RecipesDir + "/dsv4/sglang/gb200-fp4/agentx/agg.yaml":         "ix agg",
		RecipesDir + "/configs/dsv4-moe-load-balancer-configs/a.yaml": "eplb",
		SubmoduleDir + "/configs/install-torchao.sh":                  "echo hi",
		SubmoduleDir + "/src/srtctl/cli/submit.py":                    "code",
	})
	r, err := Compose(ix, "", t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, PinnedTree, r.Layout)
	assert.Equal(t, filepath.Join(ix, SubmoduleDir), r.SrtSlurm)
	assert.Equal(t, "ix agg", read(t, r, "recipes/dsv4/sglang/gb200-fp4/agentx/agg.yaml"))
	assert.Equal(t, "ix agg", read(t, r, RecipesDir+"/dsv4/sglang/gb200-fp4/agentx/agg.yaml"), "both CONFIG_FILE spellings")
	assert.Equal(t, "eplb", read(t, r, "configs/dsv4-moe-load-balancer-configs/a.yaml"))
	assert.Equal(t, "echo hi", read(t, r, "configs/install-torchao.sh"))
	require.NoError(t, r.Check("gb200-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "dsv4", Precision: "fp4", Agentic: true}, "recipes/x.yaml"),
		"one tree for every key: nothing to tell apart")
}
