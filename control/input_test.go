package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

func TestBuildSweepSeed(t *testing.T) {
	in, p, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.Len(t, in.Points, 8)
	require.Len(t, p.Points, 8)
	require.Equal(t, 18, in.NodeBudget)
	require.Equal(t, "cluster-local-sim", in.TaskQueue)
	var nodes []int
	evals := 0
	for _, pt := range in.Points {
		nodes = append(nodes, pt.Nodes)
		require.InDelta(t, 3.77, pt.SyntheticAL, 1e-9, "golden AL for DSpark, 6 draft tokens, thinking on")
		require.NotEmpty(t, pt.CheckpointSource, "the recipe's model alias resolves through the cluster profile")
		require.Regexp(t, `^[0-9a-f]{64}-c\d+$`, pt.Identity)
		if pt.Eval {
			evals++
		}
	}
	require.Equal(t, []int{2, 2, 6, 6, 12, 16, 16, 16}, nodes)
	require.Equal(t, 4, evals)

	// The sweep ID is deterministic: the same plan gives the same ID.
	again, _, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.Equal(t, in.SweepID, again.SweepID)
}

func TestBuildSweepErrors(t *testing.T) {
	req := Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"}
	tests := []struct {
		name   string
		faults []string
		want   string
	}{
		{"ambiguous point", []string{"conc128:eval"}, "matches 2 points"},
		{"unknown stage", []string{"conc64_:reboot"}, `unknown stage "reboot"`},
		{"bad count", []string{"conc64_:eval:zero"}, "positive integer"},
		{"bad shape", []string{"conc64_"}, "POINT:STAGE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.Faults = tc.faults
			_, _, err := Build(r)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// A golden AL table that disagrees with the config's pinned AL is caught.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "golden_al_distribution.yaml"), []byte("deepseek-v4-pro-0813:\n  thinking_on:\n    6: 3.5\n"), 0o644))
	sweep, err := os.ReadFile("../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	abs, _ := filepath.Abs("../configs")
	text := string(sweep)
	text = strings.ReplaceAll(text, "../dsv4-gb200-agentx.yaml", filepath.Join(abs, "dsv4-gb200-agentx.yaml"))
	text = strings.ReplaceAll(text, "../runners.yaml", filepath.Join(abs, "runners.yaml"))
	text = strings.ReplaceAll(text, "../clusters/gb200-nvl72.yaml", filepath.Join(abs, "clusters", "gb200-nvl72.yaml"))
	text = strings.ReplaceAll(text, "recipes-root: ..", "recipes-root: "+abs)
	text = strings.ReplaceAll(text, "${SWEEPFLOW_GOLDEN_AL:-../golden-al/dsv4-pro-0813-dspark.yaml}", filepath.Join(dir, "golden_al_distribution.yaml"))
	sweepFile := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(sweepFile, []byte(text), 0o644))
	_, _, err = Build(Request{SweepFile: sweepFile, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.ErrorContains(t, err, "golden AL for 6 draft tokens is 3.5")
}

// A plan of storedPlanPoints points or more starts the sweep with a
// reference to the plan stored in the ledger, not the points; the static
// details list a bounded table.
func TestWorkflowInputRefsLargePlans(t *testing.T) {
	for _, n := range []int{1, storedPlanPoints - 1, storedPlanPoints, 10000} {
		in := &workflows.SweepInput{SweepID: "s", Points: make([]point.Spec, n)}
		got := WorkflowInput(in)
		if n < storedPlanPoints {
			assert.Len(t, got.Points, n, "n=%d", n)
			assert.Empty(t, got.PlanRef, "n=%d", n)
		} else {
			assert.Empty(t, got.Points, "n=%d", n)
			assert.Equal(t, "s", got.PlanRef, "n=%d", n)
		}
		assert.Len(t, in.Points, n, "the caller's input is untouched")
		assert.LessOrEqual(t, strings.Count(Details(in), "\n"), detailRows+6, "n=%d", n)
	}
}

// A sweep's activities go to the queue the cluster profile names (the
// workers poll the same one), not to one derived from the cluster's name.
func TestBuildSweepUsesProfileTaskQueue(t *testing.T) {
	prof, err := os.ReadFile("../configs/clusters/local-sim.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	custom := strings.Replace(string(prof), "task-queue: cluster-local-sim", "task-queue: gb200-rack-7", 1)
	custom = strings.ReplaceAll(custom, "../../.sweepflow", filepath.Join(dir, "data"))
	custom = strings.Replace(custom, "recipes-root: ..", "recipes-root: "+AbsPath("../configs"), 1)
	require.Contains(t, custom, "task-queue: gb200-rack-7")
	cf := filepath.Join(dir, "local-sim.yaml")
	require.NoError(t, os.WriteFile(cf, []byte(custom), 0o644))
	in, _, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: cf})
	require.NoError(t, err)
	require.Equal(t, "gb200-rack-7", in.TaskQueue)
}

// TestBuildSweepRefusesWhatDoesNotLaunch: a sweep on a Slurm partition
// renders each recipe in the modes it will run in before anything starts.
// A TensorRT-LLM spec-decode row with synthetic acceptance cannot get its
// golden AL (InferenceX has no TensorRT-LLM injector), so it is refused with
// one line; the same recipe without synthetic acceptance plans, and the
// simulated backend, which launches no recipe, is not asked.
func TestBuildSweepRefusesWhatDoesNotLaunch(t *testing.T) {
	dir := t.TempDir()
	recipe, err := os.ReadFile("../configs/recipes/trtllm/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep4-dep8-stp.yaml")
	require.NoError(t, err)
	// MTP on the generation worker: a spec-decode TensorRT-LLM recipe.
	spec := strings.Replace(string(recipe), "    decode:\n", "    decode:\n      speculative_config:\n        decoding_type: MTP\n        num_nextn_predict_layers: 3\n", 1)
	require.NotEqual(t, string(recipe), spec, "the fixture's decode block moved")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "recipes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "recipes", "trt-mtp.yaml"), []byte(spec), 0o644))
	master, err := os.ReadFile("../configs/dsv4-gb200-backends.yaml")
	require.NoError(t, err)
	// The TensorRT-LLM row (the file's first) with MTP and synthetic acceptance.
	row := strings.Replace(string(master), "- spec-decoding: none", "- spec-decoding: mtp", 1)
	row = strings.Replace(row, `          - "CONFIG_FILE=recipes/trtllm/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep4-dep8-stp.yaml"`,
		`          - "SYNTHETIC_ACCEPTANCE=true"
          - "SYNTHETIC_ACCEPTANCE_LENGTH=3.01"
          - "CONFIG_FILE=recipes/trt-mtp.yaml"`, 1)
	require.NotEqual(t, string(master), row, "the fixture's TensorRT-LLM row moved")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(row), 0o644))
	runners, err := filepath.Abs("../configs/runners.yaml")
	require.NoError(t, err)
	profile, err := filepath.Abs("../configs/clusters/slurm-emu.yaml")
	require.NoError(t, err)
	sweep := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(sweep, []byte("name: trt-mtp\nconfig-files: [master.yaml]\nrunner-config: "+runners+
		"\ncluster: "+profile+"\nconfig-keys: [dsv4-fp4-gb200-dynamo-trt-agentic-disagg]\nrecipes-root: .\nthinking: true\n"), 0o644))

	_, _, err = Build(Request{SweepFile: sweep, ClusterFile: "../configs/clusters/slurm-emu.yaml"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "recipes/trt-mtp.yaml does not launch on slurm-emu, nothing was started")
	assert.Contains(t, err.Error(), "InferenceX has no synthetic-acceptance injector for trtllm")
	assert.NotContains(t, err.Error(), "\n", "one line")

	in, _, err := Build(Request{SweepFile: sweep, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err, "the simulator launches no recipe")
	require.Len(t, in.Points, 2)

	// The row as it ships (no speculation, no synthetic acceptance) launches.
	_, _, err = Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-backends.yaml", ClusterFile: "../configs/clusters/slurm-emu.yaml"})
	require.NoError(t, err)
}

// TestSimulatedAndRealPlansDiffer: the same sweep planned for the simulated
// partition and for the real GB200 rack shares no identity, no point ID and
// no default sweep ID, so a rerun on the rack cannot reuse simulated figures.
func TestSimulatedAndRealPlansDiffer(t *testing.T) {
	sweep := "../configs/sweeps/dsv4-gb200-agentx.yaml"
	sim, _, err := Build(Request{SweepFile: sweep, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	real, _, err := Build(Request{SweepFile: sweep, ClusterFile: "../configs/clusters/gb200-nvl72.yaml"})
	require.NoError(t, err)
	require.Len(t, real.Points, len(sim.Points))
	for i := range sim.Points {
		assert.Equal(t, sim.Points[i].ExpName, real.Points[i].ExpName)
		assert.NotEqual(t, sim.Points[i].Identity, real.Points[i].Identity)
		assert.NotEqual(t, sim.Points[i].PointID, real.Points[i].PointID)
		assert.NotEqual(t, sim.Points[i].ProfileHash, real.Points[i].ProfileHash)
	}
	assert.NotEqual(t, sim.SweepID, real.SweepID)
}

// TestBuildCanarySweep: --canary weighs every point by its node-minutes on
// an allocation of its own (the per-point figure of `bench nodeminutes`)
// and picks each image and backend's cheapest point.
func TestBuildCanarySweep(t *testing.T) {
	req := Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"}
	plain, _, err := Build(req)
	require.NoError(t, err)
	require.Empty(t, plain.Canaries)
	for _, p := range plain.Points {
		require.Zero(t, p.NodeMinutes, "a plain sweep's points carry no node-minutes")
	}
	req.Canary = true
	in, p, err := Build(req)
	require.NoError(t, err)
	rep, err := plan.NodeMinutes(p, plan.DefaultNodeMinuteTimes(p.Cluster.BringUpTime))
	require.NoError(t, err)
	sum := 0.0
	for _, pt := range in.Points {
		require.Positive(t, pt.NodeMinutes, pt.PointID)
		require.Equal(t, "dynamo-sglang", pt.Framework)
		sum += pt.NodeMinutes
	}
	require.InDelta(t, rep.PerPoint, sum, 1e-9, "the per-point column of bench nodeminutes")
	require.InDelta(t, 7660, sum, 1e-9, "docs/sweeps.md: 7660 node-minutes one bring-up per point")
	require.Len(t, in.Canaries, 1, "one image, one backend")
	c := in.Canaries[0]
	require.Equal(t, "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9", c.Image)
	require.Equal(t, 8, c.Points)
	// agg c1 and c4 both hold 2 x (20 + 5 + 60) = 170 node-minutes; the
	// lower concurrency wins.
	require.True(t, strings.HasPrefix(c.PointID, "dsv4_p1x8_d0x8_conc1_"), c.PointID)
	require.InDelta(t, 170.0/60, c.NodeHours, 1e-12)
	require.NotEqual(t, plain.SweepID, in.SweepID, "a canary run of a plan is another sweep")
	require.Equal(t, in.Canaries, WorkflowInput(in).Canaries)

	req.SweepFile = "../configs/sweeps/dsv4-gb200-backends.yaml"
	in, _, err = Build(req)
	require.NoError(t, err)
	var groups []string
	for _, c := range in.Canaries {
		groups = append(groups, c.Backend+":"+strings.SplitN(c.PointID, "_", 5)[3])
	}
	require.Equal(t, []string{"dynamo-trt:conc8", "dynamo-vllm:conc8", "dynamo-sglang:conc8"}, groups)
}

// TestBuildOnePointPerKey: `sweep start --one-point-per-key` starts one
// point per config key, its lowest concurrency, with the key's eval.
func TestBuildOnePointPerKey(t *testing.T) {
	in, p, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml", OnePointPerKey: true})
	require.NoError(t, err)
	require.Len(t, in.Points, 2)
	require.Len(t, p.Points, 2)
	require.Equal(t, []int{1, 64}, []int{in.Points[0].Conc, in.Points[1].Conc})
	require.Equal(t, []bool{false, true}, []bool{in.Points[0].Eval, in.Points[1].Eval})
	all, _, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.NotEqual(t, all.SweepID, in.SweepID, "another plan, another sweep")
}

const disaggKey = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"

// TestBuildAdaptive: a sweep file's adaptive entry and a --adaptive flag
// land on the start input; the key's points learn what their recipes
// claim; the sweep is another sweep than the plain one.
func TestBuildAdaptive(t *testing.T) {
	req := Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"}
	plain, _, err := Build(req)
	require.NoError(t, err)

	fill, err := point.ParseAdaptive(disaggKey + "=fill,max-points=3")
	require.NoError(t, err)
	req.Adaptive = []point.Adaptive{fill}
	in, _, err := Build(req)
	require.NoError(t, err)
	require.Equal(t, []point.Adaptive{fill}, in.Adaptive)
	require.NotEqual(t, plain.SweepID, in.SweepID, "a sweep with adaptive points is another sweep")
	claims := map[int]int{}
	for _, p := range in.Points {
		if p.ConfigKey == disaggKey {
			claims[p.Conc] = p.RecipeConc
		} else {
			require.Zero(t, p.RecipeConc, "%s: only the adaptive key's points carry their recipe's claim", p.PointID)
		}
	}
	require.Equal(t, map[int]int{64: 64, 128: 128, 256: 256, 768: 1280, 1024: 1280, 1280: 1280}, claims)

	// A sweep file's entry, and a flag replacing it.
	dir := t.TempDir()
	seed, err := os.ReadFile("../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	abs, _ := filepath.Abs("../configs")
	body := strings.ReplaceAll(strings.ReplaceAll(string(seed), "recipes-root: ..", "recipes-root: "+abs), "../", abs+"/") + "adaptive:\n  - config-key: " + disaggKey +
		"\n    mode: slo\n    topology: 2P1D DEP16/DEP32\n    slo: {metric: median_intvty, min: 50}\n    grid: {step: 128}\n"
	file := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
	in, _, err = Build(Request{SweepFile: file, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.Len(t, in.Adaptive, 1)
	require.Equal(t, point.AdaptiveSLO, in.Adaptive[0].Mode)
	in, _, err = Build(Request{SweepFile: file, ClusterFile: "../configs/clusters/local-sim.yaml", Adaptive: []point.Adaptive{fill}})
	require.NoError(t, err)
	require.Equal(t, []point.Adaptive{fill}, in.Adaptive, "the flag replaces the file's entry for its key")

	// Errors name where the request is written and the field.
	bad := strings.Replace(body, "topology: 2P1D DEP16/DEP32", "topology: 3P1D", 1)
	require.NoError(t, os.WriteFile(file, []byte(bad), 0o644))
	_, _, err = Build(Request{SweepFile: file, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.ErrorContains(t, err, `s.yaml:`)
	require.ErrorContains(t, err, `adaptive[0]: topology: `+disaggKey+` has no deployment of topology "3P1D"`)
	_, _, err = Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml",
		Adaptive: []point.Adaptive{{ConfigKey: "no-such-key", Mode: point.AdaptiveFill, MaxPoints: 1}}})
	require.ErrorContains(t, err, "--adaptive no-such-key: config-key: no-such-key has no point in the plan")
}
