package plan

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/treecopy"
)

const (
	seedSweep   = "sweeps/dsv4-gb200-agentx.yaml"
	seedMaster  = "dsv4-gb200-agentx.yaml"
	seedCluster = "clusters/gb200-nvl72.yaml"
	recipeDir   = "recipes/sglang/deepseek-v4-0813/gb200/agentic/"
	bigRecipe   = recipeDir + "disagg-gb200-2p1d-dep16-dep32-c1280-dspark6-hicache.yaml"
)

// copySeed copies the repository's configs/ into a fresh directory so a
// test can edit one file without touching the real seed.
func copySeed(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "configs"))
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "configs")
	require.NoError(t, treecopy.Copy(src, dst, nil))
	return dst
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

func build(t *testing.T, dir, cluster string) (*Plan, error) {
	t.Helper()
	s, err := config.LoadSweep(filepath.Join(dir, seedSweep))
	require.NoError(t, err)
	c, err := config.LoadCluster(filepath.Join(dir, cluster))
	require.NoError(t, err)
	return Build(Options{Sweep: s, Cluster: c})
}

func TestSeedPlan(t *testing.T) {
	p, err := build(t, filepath.Join("..", "configs"), seedCluster)
	require.NoError(t, err)
	require.Len(t, p.Points, 8)

	type want struct {
		conc, nodes, gpus, pg, dg int
		topo                      string
		eval                      bool
	}
	wants := []want{
		{1, 2, 8, 8, 0, "TP8 agg", false},
		{4, 2, 8, 8, 0, "TP8 agg", false},
		{64, 6, 24, 8, 16, "1P1D DEP8/DEP16", true},
		{128, 6, 24, 8, 16, "1P1D DEP8/DEP16", true},
		{256, 12, 48, 16, 32, "1P1D DEP16/DEP32", true},
		{768, 16, 64, 32, 32, "2P1D DEP16/DEP32", false},
		{1024, 16, 64, 32, 32, "2P1D DEP16/DEP32", false},
		{1280, 16, 64, 32, 32, "2P1D DEP16/DEP32", true},
	}
	for i, w := range wants {
		pt := p.Points[i]
		assert.Equal(t, i, pt.Index)
		assert.Equal(t, w.conc, pt.Conc, i)
		assert.Equal(t, w.nodes, pt.Nodes, i)
		assert.Equal(t, w.gpus, pt.GPUs, i)
		assert.Equal(t, w.pg, pt.PrefillGPUs, i)
		assert.Equal(t, w.dg, pt.DecodeGPUs, i)
		assert.Equal(t, w.topo, pt.Topology, i)
		assert.Equal(t, w.eval, pt.Eval, i)
		assert.Equal(t, 6, pt.DraftTokens, i)
		assert.Equal(t, 721, pt.TotalCPUDRAMGB, i)
		assert.Equal(t, 3600, pt.DurationSec, i)
		assert.Equal(t, "dram", pt.KVOffloading, i)
		assert.Equal(t, "hicache", pt.KVOffloadBackend, i)
		assert.Equal(t, "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9", pt.Image)
		assert.Equal(t, "deepseek-ai/DeepSeek-V4-Pro-0813", pt.Model)
		assert.Equal(t, "dynamo-router 1.5.0.dev20260910", pt.Router)
		assert.True(t, strings.HasPrefix(pt.RecipePath, recipeDir), pt.RecipePath)
		assert.True(t, filepath.IsAbs(pt.RecipeFile))
		assert.Len(t, pt.DeploymentHash, 64)
		assert.Equal(t, pt.DeploymentHash+"-c"+strconv.Itoa(pt.Conc), pt.Identity)
		assert.Equal(t, pt.Profile.Hash(), pt.ProfileHash)
		assert.InDelta(t, 3.77, pt.SyntheticAL, 1e-9, "the golden AL for 6 draft tokens, thinking on")
		assert.Contains(t, string(pt.Row), `"exp-name":"`+pt.ExpName+`"`)
		assert.Equal(t, pt.Disagg, i >= 2)
	}
	assert.Equal(t, "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc1280_kvdram-hicache", p.Points[7].ExpName)
	assert.Equal(t, "nixl", p.Points[7].KVP2PTransfer)
	assert.Equal(t, 2, p.Points[7].PrefillWorkers)
	assert.Equal(t, 16, p.Points[7].PrefillTP)
	assert.True(t, p.Points[7].DecodeDPA)
	assert.Equal(t, 32, p.Points[7].DecodeEP)
	// Six deployments: the three 2P1D rows share one allocation and one
	// bring-up, so 2+2+6+6+12+16 nodes are held, not 2+2+6+6+12+3x16.
	groups := p.BringUpGroups()
	require.Len(t, groups, 6)
	for i, g := range groups {
		assert.Equal(t, i+1, g.Group)
		for _, j := range g.Points {
			assert.Equal(t, g.Group, p.Points[j].BringUpGroup)
			assert.Equal(t, g.DeploymentHash, p.Points[j].DeploymentHash)
		}
	}
	assert.Equal(t, []int{5, 6, 7}, groups[5].Points)
	assert.Equal(t, []int{768, 1024, 1280}, groups[5].Concs)
	assert.Equal(t, 1, groups[5].Evals)
	assert.Equal(t, 44, p.NodeAllocations())
	assert.Equal(t, 4, p.EvalRestarts())
	assert.Equal(t, 4, p.Evals())
	assert.Len(t, p.Rows, 8)
	assert.Len(t, p.EvalRows, 4)

	// Rows differing only in conc share a deployment; the identity tells
	// the points apart. Distinct recipes give distinct deployments.
	assert.Equal(t, p.Points[5].DeploymentHash, p.Points[7].DeploymentHash)
	assert.NotEqual(t, p.Points[5].Identity, p.Points[7].Identity)
	assert.NotEqual(t, p.Points[2].DeploymentHash, p.Points[3].DeploymentHash)
	seen := map[string]bool{}
	for _, pt := range p.Points {
		require.False(t, seen[pt.Identity], "point identities are unique")
		require.False(t, seen[pt.ID], "point IDs are unique")
		seen[pt.Identity], seen[pt.ID] = true, true
	}
}

func TestSeedPlanWithoutEvals(t *testing.T) {
	dir := copySeed(t)
	edit(t, filepath.Join(dir, seedSweep), "evals: true", "evals: false")
	p, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	assert.Zero(t, p.Evals())
}

func TestIdentityStableAndRecipeSensitive(t *testing.T) {
	ref, err := build(t, filepath.Join("..", "configs"), seedCluster)
	require.NoError(t, err)

	// The same inputs from another directory hash the same.
	dir := copySeed(t)
	moved, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	for i := range ref.Points {
		assert.Equal(t, ref.Points[i].Identity, moved.Points[i].Identity, i)
		assert.NotEqual(t, ref.Points[i].RecipeFile, moved.Points[i].RecipeFile)
	}

	// A comment, or the recipe's schema-2 spelling, is the same deployment:
	// the identity hashes what the recipe resolves to.
	edit(t, filepath.Join(dir, bigRecipe), "# DeepSeek-V4-Pro-0813", "# DeepSeek-V4-Pro-0814")
	data, err := os.ReadFile(filepath.Join(dir, bigRecipe))
	require.NoError(t, err)
	v2, err := config.MigrateRecipe(bigRecipe, data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, bigRecipe), v2, 0o644))
	respelled, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	for i := range ref.Points {
		assert.Equal(t, ref.Points[i].Identity, respelled.Points[i].Identity, i)
	}

	// One changed value in one recipe changes exactly the points that use it.
	edit(t, filepath.Join(dir, bigRecipe), "mem-fraction-static: 0.85", "mem-fraction-static: 0.86")
	changed, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	for i := range ref.Points {
		if strings.HasSuffix(ref.Points[i].RecipePath, filepath.Base(bigRecipe)) {
			assert.NotEqual(t, ref.Points[i].Identity, changed.Points[i].Identity, i)
		} else {
			assert.Equal(t, ref.Points[i].Identity, changed.Points[i].Identity, i)
		}
	}

	// So does the image, and the launcher (simulated results never pass for real ones).
	sim, err := build(t, filepath.Join("..", "configs"), "clusters/local-sim.yaml")
	require.NoError(t, err)
	for i := range ref.Points {
		assert.NotEqual(t, ref.Points[i].Identity, sim.Points[i].Identity, "local-sim and gb200-nvl72 never share an identity")
		assert.NotEqual(t, ref.Points[i].ID, sim.Points[i].ID)
		assert.NotEqual(t, ref.Points[i].ProfileHash, sim.Points[i].ProfileHash)
	}
	assert.Equal(t, ref.Points[0].Nodes, sim.Points[0].Nodes)
	dir2 := copySeed(t)
	edit(t, filepath.Join(dir2, seedMaster), "nightly-dev-20260916-c9a8fba9", "nightly-dev-20260917-00000000")
	img, err := build(t, dir2, seedCluster)
	require.NoError(t, err)
	assert.NotEqual(t, ref.Points[0].Identity, img.Points[0].Identity)
	assert.Equal(t, ref.Points[2].Identity, img.Points[2].Identity, "only the first key's image changed")
}

// TestRecipeSets: --set overrides apply to every recipe of the plan; the
// identity hashes their effect (a set that changes nothing is the same
// deployment), and every point carries them so the worker launches the
// recipe the identity names.
func TestRecipeSets(t *testing.T) {
	configs := filepath.Join("..", "configs")
	s, err := config.LoadSweep(filepath.Join(configs, seedSweep))
	require.NoError(t, err)
	c, err := config.LoadCluster(filepath.Join(configs, seedCluster))
	require.NoError(t, err)
	ref, err := Build(Options{Sweep: s, Cluster: c})
	require.NoError(t, err)
	same := []string{"health_check.interval_seconds=10"} // what every seed recipe says already
	noop, err := Build(Options{Sweep: s, Cluster: c, RecipeSets: same})
	require.NoError(t, err)
	set := []string{"health_check.interval_seconds=20"}
	changed, err := Build(Options{Sweep: s, Cluster: c, RecipeSets: set})
	require.NoError(t, err)
	assert.Equal(t, set, changed.RecipeSets)
	specs := PointSpecs(changed, c, true)
	for i := range ref.Points {
		assert.Equal(t, ref.Points[i].Identity, noop.Points[i].Identity, "a set that changes nothing is the same deployment")
		assert.NotEqual(t, ref.Points[i].Identity, changed.Points[i].Identity, "a set that changes the recipe is another")
		assert.Equal(t, set, changed.Points[i].RecipeSets)
		assert.Equal(t, set, specs[i].RecipeSets)
		assert.Equal(t, changed.Points[i].RecipeDigest, specs[i].RecipeDigest)
		// What the worker checks before it launches: the file with the
		// point's sets resolves to the planned recipe; without them it does not.
		require.NoError(t, config.VerifyPlannedRecipe(configs, specs[i].RecipePath, specs[i].RecipeDigest, specs[i].RecipeSets...))
		require.Error(t, config.VerifyPlannedRecipe(configs, specs[i].RecipePath, specs[i].RecipeDigest))
	}
	assert.Equal(t, 1440*20, int(changed.Points[0].Recipe.HealthCheck.Timeout().Seconds()))
	_, err = Build(Options{Sweep: s, Cluster: c, RecipeSets: []string{"health_check.interval_seconds=-1"}})
	require.ErrorContains(t, err, "health_check.interval_seconds: must be > 0")
}

func TestDedicatedNodeAddsOne(t *testing.T) {
	dir := copySeed(t)
	edit(t, filepath.Join(dir, bigRecipe), "etcd_nats_dedicated_node: false", "etcd_nats_dedicated_node: true")
	p, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	assert.Equal(t, 17, p.Points[7].Nodes)
	assert.Equal(t, 1, p.Points[7].DedicatedNodes)
	assert.Equal(t, 64, p.Points[7].GPUs)
	assert.Equal(t, 12, p.Points[4].Nodes)
}

func TestPlanErrors(t *testing.T) {
	cases := []struct {
		name       string
		file       string
		old, new   string
		wantPrefix string // FILE:LINE as shown to the user (relative to the copy)
		want       string
	}{
		{"row larger than the cluster", seedCluster, "nodes: 18", "nodes: 12", seedMaster + ":147:",
			"dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg.scenarios.agentic-coding[0].search-space[3]: 2P1D DEP16/DEP32 needs 16 nodes"},
		{"missing recipe", seedMaster, "c64-dspark6-hicache.yaml", "c65-dspark6-hicache.yaml", seedMaster + ":102:",
			"search-space[0].prefill.additional-settings[2]: recipe recipes/sglang/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep8-dep16-c65-dspark6-hicache.yaml not found"},
		{"recipe disagrees with the entry", seedMaster, "          num-worker: 2\n", "          num-worker: 3\n", seedMaster + ":152:",
			"prefill.num-worker: is 3 but recipe recipes/sglang/deepseek-v4-0813/gb200/agentic/disagg-gb200-2p1d-dep16-dep32-c1280-dspark6-hicache.yaml runs 2 prefill worker(s)"},
		{"recipe error keeps its own position", bigRecipe, "  decode_workers: 1\n", "  decode_workers: one\n", bigRecipe + ":55:",
			"resources.decode_workers: expected an integer"},
		{"runner not served", seedCluster, "runners: [cluster:gb200-nv, gb200]", "runners: [cluster:gb300-nv]", seedMaster + ":20:",
			"runner \"cluster:gb200-nv\" is not served by cluster gb200-nvl72"},
		{"gpus per node mismatch", "runners.yaml", "gpus-per-node: 4", "gpus-per-node: 8", seedMaster + ":20:",
			"runner cluster:gb200-nv has 8 GPUs per node but cluster gb200-nvl72 has 4"},
		{"no CONFIG_FILE", seedMaster, "          - \"CONFIG_FILE=recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c1-dspark6-hicache.yaml\"\n", "", seedMaster + ":32:",
			"prefill.additional-settings: no CONFIG_FILE=<recipe> entry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copySeed(t)
			edit(t, filepath.Join(dir, tc.file), tc.old, tc.new)
			t.Chdir(dir) // error paths are shown relative to the working directory
			_, err := build(t, ".", seedCluster)
			require.Error(t, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, tc.wantPrefix), "%q does not start with %q", msg, tc.wantPrefix)
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, msg, "\n")
			if !strings.Contains(tc.name, "runner") && !strings.Contains(tc.name, "gpus per node") {
				// Rows of one entry share a recipe and a shape: one report each.
				assert.NotContains(t, msg, "more problem")
			}
		})
	}
}

func TestTopology(t *testing.T) {
	w := func(n, tp, ep int, dpa bool) *ixconfig.Worker {
		return &ixconfig.Worker{NumWorker: n, TP: tp, EP: ep, DPAttn: dpa, PP: 1, PCPSize: 1}
	}
	cases := []struct {
		p, d *ixconfig.Worker
		want string
	}{
		{w(1, 8, 1, false), w(0, 8, 1, false), "TP8 agg"},
		{w(2, 4, 1, false), w(0, 4, 1, false), "2xTP4 agg"},
		{w(1, 8, 8, true), w(0, 8, 8, true), "DEP8 agg"},
		{w(1, 8, 8, true), w(1, 16, 16, true), "1P1D DEP8/DEP16"},
		{w(2, 16, 16, true), w(1, 32, 32, true), "2P1D DEP16/DEP32"},
		{w(1, 8, 8, false), w(3, 8, 4, false), "1P3D TEP8/TP8/EP4"},
		{w(1, 8, 4, true), w(1, 4, 1, false), "1P1D TP8/EP4/DPA/TP4"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Topology(tc.p, tc.d))
	}
}

func TestFixedSeqLenRowsHaveDistinctIdentities(t *testing.T) {
	s, err := config.LoadSweep(filepath.Join("testdata", "fixed", "sweep.yaml"))
	require.NoError(t, err)
	c, err := config.LoadCluster(s.ClusterPath)
	require.NoError(t, err)
	p, err := Build(Options{Sweep: s, Cluster: c})
	require.NoError(t, err)
	require.Len(t, p.Points, 5)
	ids, pointIDs := map[string]bool{}, map[string]bool{}
	for _, pt := range p.Points {
		assert.Equal(t, "dsv4_1k1k", pt.ExpName, "InferenceX gives every fixed-seq-len point the same exp-name")
		assert.False(t, ids[pt.Identity], "identity %s repeats", pt.Identity)
		assert.False(t, pointIDs[pt.ID], "point ID %s repeats", pt.ID)
		ids[pt.Identity], pointIDs[pt.ID] = true, true
		assert.Equal(t, 1024, pt.Profile.ISL)
		assert.Equal(t, "fixed-seq-len", pt.Profile.Scenario)
	}
	// The first row's three concurrencies share one deployment.
	assert.Equal(t, p.Points[0].DeploymentHash, p.Points[2].DeploymentHash)
	assert.NotEqual(t, p.Points[0].DeploymentHash, p.Points[3].DeploymentHash)
}

func TestDuplicateIdentityIsAPlanError(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"master.yaml", "sweep.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "fixed", f))
		require.NoError(t, err)
		abs, _ := filepath.Abs(filepath.Join("..", "configs"))
		data = []byte(strings.ReplaceAll(string(data), "../../../configs", abs))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	cases := []struct{ name, old, new, want string }{
		// InferenceX keeps conc-list raw, so a repeated conc is two points.
		{"repeated concurrency in one row", "conc-list: [4, 16, 64]", "conc-list: [4, 16, 4]", "duplicate point: dsv4_1k1k (conc 4)"},
		// Two entries that deploy the same thing at the same conc.
		{"same deployment listed twice", "agg-gb200-tp8-c1-dspark6-hicache.yaml", "agg-gb200-tp8-c4-dspark6-hicache.yaml", "duplicate point: dsv4_1k1k (conc 4)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join(dir, "master.yaml"))
			require.NoError(t, err)
			defer os.WriteFile(filepath.Join(dir, "master.yaml"), orig, 0o644)
			edit(t, filepath.Join(dir, "master.yaml"), c.old, c.new)
			s, err := config.LoadSweep(filepath.Join(dir, "sweep.yaml"))
			require.NoError(t, err)
			cl, err := config.LoadCluster(s.ClusterPath)
			require.NoError(t, err)
			_, err = Build(Options{Sweep: s, Cluster: cl})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "same identity")
		})
	}
}

// TestEmulatedAndRealSlurmShareNoIdentity: the emulated partition runs the
// real launcher but simulator roles behind it, so its points (and nightly
// baseline keys) never stand for the real rack's.
func TestEmulatedAndRealSlurmShareNoIdentity(t *testing.T) {
	real, err := build(t, filepath.Join("..", "configs"), seedCluster)
	require.NoError(t, err)
	emu, err := build(t, filepath.Join("..", "configs"), "clusters/slurm-emu.yaml")
	require.NoError(t, err)
	require.Equal(t, len(real.Points), len(emu.Points))
	assert.Equal(t, "slurm+sbatch/sweepflow-launch/1", real.LauncherVersion)
	assert.Equal(t, "slurm-emulated+sbatch/sweepflow-launch/1", emu.LauncherVersion)
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, p := range real.Points {
		ids[p.Identity], keys[p.BaselineKey] = true, true
	}
	for i, p := range emu.Points {
		assert.False(t, ids[p.Identity], "point %d: the emulation shares an identity with the real rack", i)
		assert.False(t, keys[p.BaselineKey], "point %d: the emulation shares a nightly baseline key with the real rack", i)
		assert.Equal(t, real.Points[i].Nodes, p.Nodes, "same allocation, point %d", i)
	}
}

// TestOnePointPerKey: a fleet bring-up plans each key's lowest
// concurrency, on the first row that has it, and keeps the key's eval there.
func TestOnePointPerKey(t *testing.T) {
	dir := filepath.Join("..", "configs")
	full, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	s, err := config.LoadSweep(filepath.Join(dir, seedSweep))
	require.NoError(t, err)
	c, err := config.LoadCluster(filepath.Join(dir, seedCluster))
	require.NoError(t, err)
	p, err := Build(Options{Sweep: s, Cluster: c, OnePointPerKey: true})
	require.NoError(t, err)
	require.Len(t, p.Points, len(s.ConfigKeys))
	for i, key := range s.ConfigKeys {
		var want *Point
		evals := false
		for j := range full.Points {
			pt := &full.Points[j]
			if pt.ConfigKey != key {
				continue
			}
			evals = evals || pt.Eval
			if want == nil || pt.Conc < want.Conc {
				want = pt
			}
		}
		got := p.Points[i]
		assert.Equal(t, key, got.ConfigKey)
		assert.Equal(t, want.Conc, got.Conc, key)
		assert.Equal(t, want.Identity, got.Identity, key)
		assert.Equal(t, evals, got.Eval, key)
		assert.Equal(t, i, got.Index)
	}

	// The eval moves to the kept concurrency when InferenceX picked another.
	m, err := ixconfig.LoadMaster(s.ConfigFiles...)
	require.NoError(t, err)
	r, err := ixconfig.LoadRunners(s.RunnerConfig)
	require.NoError(t, err)
	rows, err := matrix.Generate(m, r, matrix.Options{Keys: s.ConfigKeys})
	require.NoError(t, err)
	require.Equal(t, []int{1}, rows[0].Conc())
	require.Equal(t, []int{4}, rows[1].Conc())
	kept, at := onePerKey(rows, map[int]int{1: 4})
	require.Len(t, kept, 2)
	assert.Same(t, rows[0], kept[0], "the agg key's conc-1 row")
	assert.Equal(t, map[int]int{0: 1}, at, "its eval, picked at conc 4, runs at conc 1")
}

// TestRecipeGPUsLaunch: where the row's tp and the recipe disagree on GPUs
// per worker, the recipe launches (as InferenceX's launcher runs it): the
// plan takes the allocation from the recipe; `starter check` reports it.
func TestRecipeGPUsLaunch(t *testing.T) {
	dir := copySeed(t)
	edit(t, filepath.Join(dir, seedMaster), "          num-worker: 1\n          tp: 8\n", "          num-worker: 1\n          tp: 4\n")
	p, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	assert.Equal(t, "TP4 agg", p.Points[0].Topology, "the row's own label")
	assert.Equal(t, 8, p.Points[0].GPUs, "the recipe's TP8 worker")
	assert.Equal(t, 2, p.Points[0].Nodes)
}

// TestProfileCheckouts: a profile naming the user's checkouts plans from the
// root composed from them, under the user cache; the recipe a key's
// launcher would not lay down is refused where the row names it.
func TestProfileCheckouts(t *testing.T) {
	dir := copySeed(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "cache"))
	// srt-slurm's tree holds the seed's recipes; InferenceX's tree has
	// none of them (its GB200 launcher lays InferenceX's
	// vllm/deepseek-v4/agentic for these agentic dynamo-sglang dsv4 keys).
	srt := filepath.Join(t.TempDir(), "srt-slurm")
	require.NoError(t, os.CopyFS(filepath.Join(srt, "recipes"), os.DirFS(filepath.Join(dir, "recipes"))))
	ix := filepath.Join(t.TempDir(), "InferenceX")
	qwen := filepath.Join(ix, "benchmarks", "multi_node", "srt-slurm-recipes", "sglang", "qwen3.5", "gb200-fp4", "agentic")
	require.NoError(t, os.MkdirAll(qwen, 0o755))
	edit(t, filepath.Join(dir, seedSweep), "recipes-root: ..\n", "")
	// InferenceX names the machine gb200-nv_0: its launcher is launch_gb200-nv.sh.
	edit(t, filepath.Join(dir, "runners.yaml"), "  cluster:gb200-nv:\n    - gb200-nvl72\n", "  cluster:gb200-nv:\n    - gb200-nv_0\n")
	edit(t, filepath.Join(dir, seedCluster), "recipes-root: /mnt/lustre01/sweepflow/srt-slurm\n", "inferencex: "+ix+"\nsrt-slurm: "+srt+"\n")
	p, err := build(t, dir, seedCluster)
	require.NoError(t, err)
	require.Len(t, p.Points, 8)
	assert.True(t, strings.HasPrefix(p.RecipesRoot, filepath.Join(os.Getenv("XDG_CACHE_HOME"), "sweepflow", "recipes")+string(filepath.Separator)), p.RecipesRoot)
	assert.True(t, strings.HasPrefix(p.Points[0].RecipeFile, p.RecipesRoot), p.Points[0].RecipeFile)

	// InferenceX's sglang/qwen3.5/gb200-fp4/agentic is laid for qwen3.5
	// keys only: a dsv4 key naming a recipe there would run srt-slurm's,
	// which has none.
	edit(t, filepath.Join(dir, seedMaster), "recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c1-dspark6-hicache.yaml",
		"recipes/sglang/qwen3.5/gb200-fp4/agentic/agg.yaml")
	require.NoError(t, os.WriteFile(filepath.Join(qwen, "agg.yaml"), []byte("name: x\n"), 0o644))
	_, err = build(t, dir, seedCluster)
	require.ErrorContains(t, err, "search-space[0].prefill.additional-settings[2]: recipe recipes/sglang/qwen3.5/gb200-fp4/agentic/agg.yaml is InferenceX's only for other keys: "+
		"runners/launch_gb200-nv.sh lays InferenceX's vllm/deepseek-v4/agentic over srt-slurm cquil11/srt-slurm-nv@de59739b172e507e15ebf145bfe305f606e82fbf for this key (IS_AGENTIC)")
}

// BenchmarkBuildSeed is `starter plan` on the seed sweep minus process
// start-up: load sweep, master, runners, six recipes; expand; fingerprint.
func BenchmarkBuildSeed(b *testing.B) {
	dir := filepath.Join("..", "configs")
	s, err := config.LoadSweep(filepath.Join(dir, seedSweep))
	if err != nil {
		b.Fatal(err)
	}
	c, err := config.LoadCluster(filepath.Join(dir, seedCluster))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Build(Options{Sweep: s, Cluster: c}); err != nil {
			b.Fatal(err)
		}
	}
}
