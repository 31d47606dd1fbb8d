package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
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

// TestCheckPerKey: in the one composed root, a recipe is what a key's
// launcher would run only where the key's own arm copies it; every other
// case is one line naming the InferenceX data problem.
func TestCheckPerKey(t *testing.T) {
	ix, srt := checkouts(t)
	r, err := Compose(ix, srt, t.TempDir())
	require.NoError(t, err)
	dsv4VLLMAgentic := Lane{Framework: "dynamo-vllm", ModelPrefix: "dsv4", Precision: "fp4", Agentic: true}
	qwenFP8 := Lane{Framework: "dynamo-sglang", ModelPrefix: "qwen3.5", Precision: "fp8"}
	qwenAgentic := Lane{Framework: "dynamo-sglang", ModelPrefix: "qwen3.5", Precision: "fp4", Agentic: true}
	dsr1 := Lane{Framework: "dynamo-sglang", ModelPrefix: "dsr1", Precision: "fp8"}

	for _, ok := range []struct {
		launcher string
		lane     Lane
		ref      string
	}{
		{"gb200-nv", dsv4VLLMAgentic, "recipes/vllm/deepseek-v4/agentic/a.yaml"},
		{"gb200-nv", dsv4VLLMAgentic, "recipes/vllm/deepseek-v4/agentic/s.yaml"}, // srt-slurm's, as the launcher's
		{"gb200-nv", qwenFP8, "recipes/sglang/qwen3.5/gb200-fp8/x.yaml:override_a"},
		{"gb200-nv", dsr1, "recipes/gb200-fp8/8k1k/low-latency.yaml"},
		{"gb300-nv", Lane{Framework: "dynamo-trt", ModelPrefix: "dsv4", Precision: "fp4", Agentic: true}, RecipesDir + "/trtllm/deepseek-v4/agentx/t.yaml"},
		{"b200-nv", dsr1, "recipes/anything.yaml"}, // no ladder known: nothing to check
	} {
		assert.NoError(t, r.Check(ok.launcher, ok.lane, ok.ref), "%s %+v %s", ok.launcher, ok.lane, ok.ref)
	}

	err = r.Check("gb200-nv", dsv4VLLMAgentic, "recipes/vllm/deepseek-v4/agentic/gone.yaml")
	require.EqualError(t, err, "recipe recipes/vllm/deepseek-v4/agentic/gone.yaml is not in InferenceX's tree: runners/launch_gb200-nv.sh lays InferenceX's "+
		RecipesDir+"/vllm/deepseek-v4/agentic for this key (IS_AGENTIC dsv4 fp4 dynamo-vllm) and it has no such file (deleted?); restore the recipe in InferenceX or drop the row from the master config")

	// The 8k1k copy is the non-agentic arm's: an agentic key would run
	// srt-slurm's file, which this checkout does not have.
	err = r.Check("gb200-nv", dsv4VLLMAgentic, "recipes/vllm/deepseek-v4/8k1k/b.yaml")
	require.ErrorContains(t, err, "recipe recipes/vllm/deepseek-v4/8k1k/b.yaml is InferenceX's only for other keys: runners/launch_gb200-nv.sh lays InferenceX's vllm/deepseek-v4/agentic over srt-slurm v1.0.45 for this key")
	require.ErrorContains(t, err, "so it would run a recipe the srt-slurm checkout does not have")
	err = r.Check("gb200-nv", qwenAgentic, "recipes/sglang/qwen3.5/gb200-fp8/x.yaml")
	require.ErrorContains(t, err, "so it would run srt-slurm's own recipes/sglang/qwen3.5/gb200-fp8/x.yaml")

	err = r.Check("gb200-nv", dsr1, "recipes/gb200-fp8/8k1k/mid-curve.yaml")
	require.ErrorContains(t, err, "is neither laid by InferenceX for this key nor in the srt-slurm checkout "+srt+": runners/launch_gb200-nv.sh runs this key (any other lane) on srt-slurm cquil11/srt-slurm-nv@cam/sa-submission-q2-2026")

	err = r.Check("gb200-nv", Lane{Framework: "llmd-vllm", ModelPrefix: "dsv4", Precision: "fp4"}, "dsv4-fp4-gb200-low-latency.yaml")
	require.ErrorContains(t, err, "runners/launch_gb200-nv.sh runs FRAMEWORK=llmd-vllm through benchmarks/multi_node/<exp-name>_<precision>_gb200_llmd-vllm-disagg.sh, a shell launcher, not an srt-slurm recipe")
	require.Equal(t, err, Launches("gb200-nv", Lane{Framework: "llmd-vllm"}), "the same refusal without a composed root")
	require.NoError(t, Launches("gb300-nv", Lane{Framework: "llmd-vllm"}), "GB300's launcher has no llm-d arm")

	// The power lane: decided from InferenceX's copy, refused off dynamo-sglang.
	err = r.Check("gb200-nv", dsv4VLLMAgentic, "recipes/vllm/deepseek-v4/agentic/power.yaml")
	require.ErrorContains(t, err, "enables dcgm-power telemetry, which runners/launch_gb200-nv.sh runs for FRAMEWORK=dynamo-sglang only")
	dsv4SGLang := Lane{Framework: "dynamo-sglang", ModelPrefix: "dsv4", Precision: "fp4"}
	require.NoError(t, r.Check("gb300-nv", dsv4SGLang, "recipes/sglang/deepseek-v4/8k1k/power.yaml"))
	err = r.Check("gb300-nv", dsv4SGLang, "recipes/sglang/deepseek-v4/8k1k/power-missing-x.yaml")
	require.ErrorContains(t, err, "is not in InferenceX's tree")
	for file, want := range map[string]bool{"power.yaml": true, "power-off.yaml": false, "power-elsewhere.yaml": false} {
		data, err := os.ReadFile(filepath.Join(ix, RecipesDir, "sglang/deepseek-v4/8k1k", file))
		require.NoError(t, err)
		assert.Equal(t, want, usesDCGMPower(data), file)
	}
}

// TestBranchFor: lanes of nvidia-master.yaml keys take the arms their
// launcher's ladder gives them, first match first.
func TestBranchFor(t *testing.T) {
	for _, tc := range []struct {
		launcher string
		lane     Lane
		ref      string
		copies   []Copy
	}{
		{"gb200-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "dsv4", Precision: "fp4", Agentic: true}, "v1.0.45", recipes("vllm/deepseek-v4/agentic")},
		{"gb200-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "dsv4", Precision: "fp4"}, "v1.0.31", recipes("vllm/deepseek-v4")},
		{"gb200-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "kimik3", Precision: "fp4", Agentic: true}, "v1.0.53", recipes("vllm/kimi-k3/agentic")},
		{"gb200-nv", Lane{Framework: "dynamo-trt", ModelPrefix: "dsr1", Precision: "fp4"}, "cquil11/srt-slurm-nv@cam/sa-submission-q2-2026", nil},
		{"gb300-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "kimik3", Precision: "fp4", Agentic: true}, "v1.0.36",
			recipes("vllm/deepseek-v4/agentic", "vllm/minimax-m3/agentic", "vllm/kimi-k3/agentic")},
		{"gb300-nv", Lane{Framework: "dynamo-trt", ModelPrefix: "glm5.2", Precision: "fp4", Agentic: true}, "v1.0.38",
			[]Copy{{From: "trtllm/glm5.2", To: RecipesDir + "/trtllm/glm5.2"}}},
		{"gb300-nv", Lane{Framework: "dynamo-sglang", ModelPrefix: "qwen3.5", Precision: "fp8"}, "v1.0.25", recipes("sglang/qwen3.5")},
		{"gb300-nv", Lane{Framework: "dynamo-sglang", ModelPrefix: "qwen3.5", Precision: "fp4"}, "sa-submission-q2-2026", recipes("sglang/qwen3.5")},
		{"gb300-nv", Lane{Framework: "dynamo-vllm", ModelPrefix: "minimaxm3", Precision: "fp8", SpecDecoding: "mtp"}, "v1.0.38", recipes("vllm/minimax-m3-gb300-fp8")},
		{"gb300-nv", Lane{Framework: "dynamo-sglang", ModelPrefix: "glm5", Precision: "fp8"}, "main", nil},
	} {
		b, ok := BranchFor(tc.launcher, tc.lane)
		require.True(t, ok)
		assert.Equal(t, tc.ref, b.Ref, "%s %+v", tc.launcher, tc.lane)
		assert.Equal(t, tc.copies, b.Copies, "%s %+v", tc.launcher, tc.lane)
	}
	_, ok := BranchFor("b200-nv", Lane{})
	assert.False(t, ok)
}

func TestLauncherOf(t *testing.T) {
	runners := &ixconfig.Runners{Labels: map[string][]string{
		"gb200":            {"gb200-nv_0", "gb200-nv_1"},
		"cluster:gb300-nv": {"gb300-nv_0"},
		"mixed":            {"gb200-nv_0", "b200-nv_0"},
	}}
	assert.Equal(t, "gb200-nv", LauncherOf("gb200", runners))
	assert.Equal(t, "gb300-nv", LauncherOf("cluster:gb300-nv", runners))
	assert.Equal(t, "gb300-nv", LauncherOf("gb300-nv", runners), "a label runners.yaml does not list names its machines")
	assert.Equal(t, "gb300-nv", LauncherOf("cluster:gb300-nv", nil))
	assert.Equal(t, "", LauncherOf("mixed", runners), "machines of two launchers")
}
