package overlay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

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
