package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
