package overlay

import (
	"strings"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// powerFork is the dcgm-power producer both launchers pin
// (POWER_SRT_SLURM_URL@POWER_SRT_SLURM_PIN).
const powerFork = "edwingao28/srt-slurm@6fc1bed01a0b82dae0088a105c03ce0cfb353443"

// Lane conditions, spelled as the launchers test them.
func fw(f string) func(Lane) bool           { return func(l Lane) bool { return l.Framework == f } }
func model(m string) func(Lane) bool        { return func(l Lane) bool { return l.ModelPrefix == m } }
func prec(p string) func(Lane) bool         { return func(l Lane) bool { return l.Precision == p } }
func agentic(l Lane) bool                   { return l.Agentic }
func spec(s string) func(Lane) bool         { return func(l Lane) bool { return l.SpecDecoding == s } }
func always(Lane) bool                      { return true }
func not(f func(Lane) bool) func(Lane) bool { return func(l Lane) bool { return !f(l) } }

func all(fs ...func(Lane) bool) func(Lane) bool {
	return func(l Lane) bool {
		for _, f := range fs {
			if !f(l) {
				return false
			}
		}
		return true
	}
}

// recipes copies InferenceX's dir to recipes/dir, as most arms do.
func recipes(dirs ...string) []Copy {
	out := make([]Copy, len(dirs))
	for i, d := range dirs {
		out[i] = Copy{From: d, To: "recipes/" + d}
	}
	return out
}

// Branches are the srt-slurm checkout ladders of InferenceX's GB200 and
// GB300 launchers (runners/launch_gb200-nv.sh and launch_gb300-nv.sh at the
// commit of its nvidia-master.yaml), in the order they are tested: the first
// arm whose condition holds decides the ref and the copies. An arm the
// launcher can never reach (GB200's second glm5.1 arm) is left out.
var Branches = []Branch{
	// launch_gb200-nv.sh
	{Launcher: "gb200-nv", When: "FRAMEWORK=llmd-vllm", match: fw("llmd-vllm"),
		Shell: "benchmarks/multi_node/<exp-name>_<precision>_gb200_llmd-vllm-disagg.sh"},
	{Launcher: "gb200-nv", When: "IS_AGENTIC glm5.2 fp4 dynamo-sglang", match: all(agentic, model("glm5.2"), prec("fp4"), fw("dynamo-sglang")),
		Ref: "v1.0.50", Copies: recipes("sglang/glm5.2/gb200-fp4/agentic")},
	{Launcher: "gb200-nv", When: "IS_AGENTIC minimaxm3 fp4 dynamo-vllm", match: all(agentic, model("minimaxm3"), prec("fp4"), fw("dynamo-vllm")),
		Ref: "v1.0.50", Copies: recipes("vllm/minimax-m3/gb200-fp4/agentic")},
	{Launcher: "gb200-nv", When: "IS_AGENTIC qwen3.5 fp4 dynamo-sglang", match: all(agentic, model("qwen3.5"), prec("fp4"), fw("dynamo-sglang")),
		Ref: "v1.0.45", Copies: recipes("sglang/qwen3.5/gb200-fp4/agentic")},
	{Launcher: "gb200-nv", When: "IS_AGENTIC dsv4 fp4 dynamo-vllm", match: all(agentic, model("dsv4"), prec("fp4"), fw("dynamo-vllm")),
		Ref: "v1.0.45", Copies: recipes("vllm/deepseek-v4/agentic")},
	{Launcher: "gb200-nv", When: "IS_AGENTIC kimik3", match: all(agentic, model("kimik3")),
		Ref: "v1.0.53", Copies: recipes("vllm/kimi-k3/agentic")},
	{Launcher: "gb200-nv", When: "IS_AGENTIC", match: agentic,
		Ref: "cquil11/srt-slurm-nv@de59739b172e507e15ebf145bfe305f606e82fbf", Copies: recipes("vllm/deepseek-v4/agentic")},
	{Launcher: "gb200-nv", When: "dynamo-vllm dsv4", match: all(fw("dynamo-vllm"), model("dsv4")),
		Ref: "v1.0.31", Copies: recipes("vllm/deepseek-v4")},
	{Launcher: "gb200-nv", When: "dynamo-sglang dsv4", match: all(fw("dynamo-sglang"), model("dsv4")),
		Ref: "main", PowerRef: powerFork, Copies: recipes("sglang/deepseek-v4")},
	{Launcher: "gb200-nv", When: "dynamo-sglang glm5.1", match: all(fw("dynamo-sglang"), model("glm5.1")),
		Ref: "sa-submission-q2-2026", Copies: recipes("sglang/glm5")},
	{Launcher: "gb200-nv", When: "dynamo-sglang qwen3.5", match: all(fw("dynamo-sglang"), model("qwen3.5")),
		Ref: "main", PowerRef: powerFork, Copies: recipes("sglang/qwen3.5")},
	{Launcher: "gb200-nv", When: "dynamo-vllm minimaxm3 fp8", match: all(fw("dynamo-vllm"), model("minimaxm3"), prec("fp8")),
		Ref: "sa-submission-q2-2026", Copies: recipes("vllm/minimax-m3-gb200-fp8")},
	{Launcher: "gb200-nv", When: "dynamo-vllm kimik2.5 fp4", match: all(fw("dynamo-vllm"), model("kimik2.5"), prec("fp4")),
		Ref: "main", Copies: recipes("vllm/kimi-k2.5-fp4")},
	{Launcher: "gb200-nv", When: "dynamo-vllm", match: fw("dynamo-vllm"), Ref: "sa-submission-q2-2026"},
	{Launcher: "gb200-nv", When: "dynamo-trt kimik2.5", match: all(fw("dynamo-trt"), model("kimik2.5")), Ref: "sa-submission-q2-2026"},
	{Launcher: "gb200-nv", When: "dynamo-trt glm5", match: all(fw("dynamo-trt"), model("glm5")),
		Ref: "v1.0.26", Copies: recipes("trtllm/glm5")},
	{Launcher: "gb200-nv", When: "any other lane", match: always, Ref: "cquil11/srt-slurm-nv@cam/sa-submission-q2-2026"},

	// launch_gb300-nv.sh
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-trt qwen3.5", match: all(agentic, fw("dynamo-trt"), model("qwen3.5")),
		Ref: "v1.0.50", Copies: recipes("trtllm/qwen3.5/gb300-fp4/disagg/agentx")},
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-trt glm5.2", match: all(agentic, fw("dynamo-trt"), model("glm5.2")),
		Ref: "v1.0.38", Copies: []Copy{{From: "trtllm/glm5.2", To: RecipesDir + "/trtllm/glm5.2"}}},
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-sglang qwen3.5", match: all(agentic, fw("dynamo-sglang"), model("qwen3.5")),
		Ref: "v1.0.38", Copies: recipes("sglang/qwen3.5")},
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-sglang dsv4", match: all(agentic, fw("dynamo-sglang"), model("dsv4")),
		Ref: "v1.0.38", Copies: recipes("sglang/deepseek-v4/agentic")},
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-trt dsv4", match: all(agentic, fw("dynamo-trt"), model("dsv4")),
		Ref: "v1.0.50", Copies: []Copy{{From: "trtllm/deepseek-v4", To: RecipesDir + "/trtllm/deepseek-v4"}}},
	{Launcher: "gb300-nv", When: "IS_AGENTIC dynamo-sglang glm5.2", match: all(agentic, fw("dynamo-sglang"), model("glm5.2")),
		Ref: "main", Copies: recipes("sglang/glm5.2/gb300-fp4")},
	{Launcher: "gb300-nv", When: "IS_AGENTIC", match: agentic,
		Ref: "v1.0.36", Copies: recipes("vllm/deepseek-v4/agentic", "vllm/minimax-m3/agentic", "vllm/kimi-k3/agentic")},
	{Launcher: "gb300-nv", When: "dynamo-vllm dsv4", match: all(fw("dynamo-vllm"), model("dsv4")),
		Ref: "aflowers/gb200-dsv4-recipes", Copies: recipes("vllm/deepseek-v4")},
	{Launcher: "gb300-nv", When: "dynamo-sglang dsv4", match: all(fw("dynamo-sglang"), model("dsv4")),
		Ref: "v1.0.25", PowerRef: powerFork, Copies: recipes("sglang/deepseek-v4/8k1k")},
	{Launcher: "gb300-nv", When: "dynamo-sglang glm5 fp4", match: all(fw("dynamo-sglang"), model("glm5"), prec("fp4")),
		Ref: "main", Copies: recipes("sglang/glm5/gb300-fp4")},
	{Launcher: "gb300-nv", When: "dynamo-sglang glm5", match: all(fw("dynamo-sglang"), model("glm5")), Ref: "main"},
	{Launcher: "gb300-nv", When: "dynamo-sglang glm5.1 fp8", match: all(fw("dynamo-sglang"), model("glm5.1"), prec("fp8")),
		Ref: "sa-submission-q2-2026", Copies: recipes("sglang/glm5.1")},
	{Launcher: "gb300-nv", When: "dynamo-sglang glm5.1", match: all(fw("dynamo-sglang"), model("glm5.1")), Ref: "main"},
	{Launcher: "gb300-nv", When: "dynamo-sglang qwen3.5 fp8", match: all(fw("dynamo-sglang"), model("qwen3.5"), prec("fp8")),
		Ref: "v1.0.25", PowerRef: powerFork, Copies: recipes("sglang/qwen3.5")},
	{Launcher: "gb300-nv", When: "dynamo-sglang qwen3.5", match: all(fw("dynamo-sglang"), model("qwen3.5")),
		Ref: "sa-submission-q2-2026", PowerRef: powerFork, Copies: recipes("sglang/qwen3.5")},
	{Launcher: "gb300-nv", When: "dynamo-vllm minimaxm3 SPEC_DECODING=mtp", match: all(fw("dynamo-vllm"), model("minimaxm3"), spec("mtp")),
		Ref: "v1.0.38", Copies: recipes("vllm/minimax-m3-gb300-fp8")},
	{Launcher: "gb300-nv", When: "dynamo-vllm minimaxm3", match: all(fw("dynamo-vllm"), model("minimaxm3"), not(spec("mtp"))),
		Ref: "sa-submission-q2-2026", Copies: recipes("vllm/minimax-m3-gb300-fp8")},
	{Launcher: "gb300-nv", When: "dynamo-vllm kimik2.5 fp4", match: all(fw("dynamo-vllm"), model("kimik2.5"), prec("fp4")),
		Ref: "main", Copies: recipes("vllm/kimi-k2.5-fp4")},
	{Launcher: "gb300-nv", When: "dynamo-trt dsv4", match: all(fw("dynamo-trt"), model("dsv4")), Ref: "sa-submission-q2-2026"},
	{Launcher: "gb300-nv", When: "dynamo-trt qwen3.5 fp4", match: all(fw("dynamo-trt"), model("qwen3.5"), prec("fp4")),
		Ref: "v1.0.29", Copies: recipes("trtllm/qwen3.5/gb300-fp4/disagg")},
	{Launcher: "gb300-nv", When: "any other lane", match: always, Ref: "sa-submission-q2-2026"},
}

// BranchFor is the arm of launcher's ladder a lane takes; false when
// Branches has no ladder for launcher.
func BranchFor(launcher string, l Lane) (*Branch, bool) {
	for i := range Branches {
		if b := &Branches[i]; b.Launcher == launcher && b.match(l) {
			return b, true
		}
	}
	return nil, false
}

// LaneOf reads a matrix row's lane.
func LaneOf(row *matrix.Row) Lane {
	e := row.Entry
	l := Lane{Framework: e.Framework, ModelPrefix: e.ModelPrefix, Precision: e.Precision, Agentic: row.Scenario == matrix.AgenticCoding}
	if row.Search != nil {
		l.SpecDecoding = row.Search.SpecDecoding
	}
	return l
}

// LauncherOf names the launcher InferenceX runs a runner label's jobs with:
// runners/launch_<name>.sh, <name> being the runner machine's name up to
// its first '_' (gb200-nv_0 -> gb200-nv). A label runners.yaml does not list
// names its machines itself (cluster:gb300-nv, gb300-nv); "" when the
// label's machines disagree.
func LauncherOf(runner string, runners *ixconfig.Runners) string {
	var names []string
	if runners != nil {
		names = runners.Labels[runner]
	}
	if len(names) == 0 {
		names = []string{strings.TrimPrefix(runner, "cluster:")}
	}
	launcher, _, _ := strings.Cut(names[0], "_")
	for _, n := range names[1:] {
		if p, _, _ := strings.Cut(n, "_"); p != launcher {
			return ""
		}
	}
	return launcher
}
