package control

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/point"
)

// forecastFixture writes a master config made from the backends sweep's
// (three keys, five points) with edits, and a sweep file over every key.
func forecastFixture(t *testing.T, edit func(master string) string) *config.Sweep {
	t.Helper()
	dir := t.TempDir()
	master, err := os.ReadFile("../configs/dsv4-gb200-backends.yaml")
	require.NoError(t, err)
	edited := edit(string(master))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(edited), 0o644))
	root, err := filepath.Abs("../configs")
	require.NoError(t, err)
	golden, err := filepath.Abs("../configs/golden-al/dsv4-pro-0813-dspark.yaml")
	require.NoError(t, err)
	profile, err := filepath.Abs("../configs/clusters/local-sim.yaml")
	require.NoError(t, err)
	sweep := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(sweep, []byte("name: fixture\nconfig-files: [master.yaml]\nrunner-config: "+filepath.Join(root, "runners.yaml")+
		"\ncluster: "+profile+"\nconfig-keys: ['*']\nrecipes-root: "+root+"\nevals: true\ngolden-al: "+golden+"\nthinking: true\n"), 0o644))
	s, err := config.LoadSweep(sweep)
	require.NoError(t, err)
	return s
}

func replaceOnce(t *testing.T, s, old, repl string) string {
	t.Helper()
	require.Contains(t, s, old, "the fixture moved")
	return strings.Replace(s, old, repl, 1)
}

// TestForecastSaysWhatDoesNotRun: each key goes to the first profile
// that serves its runner; a key none serves, a key whose recipe is
// missing and a key `starter check` fails are each listed with the reason,
// cost nothing, and leave the rest of the forecast as it would be alone.
func TestForecastSaysWhatDoesNotRun(t *testing.T) {
	const trt, vllm, router = "dsv4-fp4-gb200-dynamo-trt-agentic-disagg", "dsv4-fp4-gb200-dynamo-vllm-agentic-mtp-disagg", "dsv4-fp4-gb200-sglang-router-agentic-agg"
	s := forecastFixture(t, func(m string) string {
		// vLLM: a recipe that is not there.
		m = replaceOnce(t, m, "CONFIG_FILE=recipes/vllm/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep4-dep8-mtp3.yaml", "CONFIG_FILE=recipes/vllm/missing.yaml")
		// The router key on GB300: only the second profile serves it.
		i := strings.Index(m, router+":")
		entry := m[i:]
		m = m[:i] + replaceOnce(t, entry, "runner: cluster:gb200-nv", "runner: cluster:gb300-nv")
		// The router key again, on MI355X (nobody serves it) and on a
		// private image (the upstream-image rule fails it).
		m += "\n" + replaceOnce(t, strings.Replace(entry, router+":", router+"-mi355x:", 1), "runner: cluster:gb200-nv", "runner: cluster:mi355x-amds")
		m += "\n" + replaceOnce(t, strings.Replace(entry, router+":", router+"-private:", 1), "image: lmsysorg/", "image: registry.example.com/")
		return m
	})
	// A simulated GB300 rack: local-sim serving the GB300 label.
	prof, err := os.ReadFile("../configs/clusters/local-sim.yaml")
	require.NoError(t, err)
	gb300 := replaceOnce(t, string(prof), "runners: [cluster:gb200-nv, gb200]", "runners: [cluster:gb300-nv]")
	gb300 = replaceOnce(t, gb300, "name: local-sim", "name: gb300-sim")
	gb300 = strings.ReplaceAll(gb300, "../../.sweepflow", filepath.Join(t.TempDir(), "data"))
	gb300File := filepath.Join(t.TempDir(), "gb300-sim.yaml")
	require.NoError(t, os.WriteFile(gb300File, []byte(gb300), 0o644))
	rep, err := Forecast(context.Background(), ForecastRequest{Sweep: s, Assumptions: forecast.DefaultAssumptions(),
		Clusters: []string{"../configs/clusters/slurm-emu.yaml", gb300File}})
	require.NoError(t, err)
	require.Len(t, rep.NotServed, 1)
	assert.Equal(t, forecast.Finding{Kind: forecast.FindingNotServed, Key: router + "-mi355x", Reason: "runner cluster:mi355x-amds: no given profile serves it"}, rep.NotServed[0])
	require.Len(t, rep.Clusters, 2)
	emu, sim := rep.Clusters[0], rep.Clusters[1]

	assert.Equal(t, "slurm-emu", emu.Name)
	require.Len(t, emu.NotForecast, 2, "%+v", emu.NotForecast)
	assert.Equal(t, forecast.FindingNoPlan, emu.NotForecast[0].Kind)
	assert.Equal(t, vllm, emu.NotForecast[0].Key)
	assert.Contains(t, emu.NotForecast[0].Reason, "recipe recipes/vllm/missing.yaml not found")
	assert.Equal(t, forecast.Finding{Kind: forecast.FindingCheck, Key: router + "-private", Points: 1}, withoutReason(emu.NotForecast[1]))
	assert.Contains(t, emu.NotForecast[1].Reason, "upstream-image")
	// What is left on slurm-emu is the TensorRT-LLM key alone: c8 and
	// c16 on one 3-node allocation, 20 + 2 x (5 + 60) + 10 min (its
	// eval needs no restart: no synthetic acceptance to drop); the
	// findings add nothing.
	assert.Equal(t, 2, emu.Points)
	assert.Equal(t, trt, emu.CriticalPath[0].ConfigKey)
	assert.InDelta(t, 3*160.0/60, emu.NodeHours, 1e-9)
	assert.InDelta(t, 160.0/60, emu.MakespanHours, 1e-9)

	assert.Equal(t, "gb300-sim", sim.Name)
	assert.Empty(t, sim.NotForecast)
	assert.Equal(t, 1, sim.Points, "the router key's c8")
	assert.Equal(t, router, sim.CriticalPath[0].ConfigKey)
}

func withoutReason(f forecast.Finding) forecast.Finding {
	f.Reason = ""
	return f
}

// TestForecastRefusedRecipeCostsNothing: on a Slurm profile a recipe the
// launcher refuses (a TensorRT-LLM spec-decode row asking for synthetic
// acceptance, which InferenceX cannot inject) leaves its points out with
// the launcher's reason; the simulator, which launches no recipe, runs them.
func TestForecastRefusedRecipeCostsNothing(t *testing.T) {
	const trt = "dsv4-fp4-gb200-dynamo-trt-agentic-disagg"
	dir := t.TempDir()
	recipe, err := os.ReadFile("../configs/recipes/trtllm/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep4-dep8-stp.yaml")
	require.NoError(t, err)
	spec := replaceOnce(t, string(recipe), "    decode:\n", "    decode:\n      speculative_config:\n        decoding_type: MTP\n        num_nextn_predict_layers: 3\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "recipes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "recipes", "trt-mtp.yaml"), []byte(spec), 0o644))
	s := forecastFixture(t, func(m string) string {
		m = replaceOnce(t, m, "- spec-decoding: none", "- spec-decoding: mtp")
		return replaceOnce(t, m, `          - "CONFIG_FILE=recipes/trtllm/deepseek-v4-0813/gb200/agentic/disagg-gb200-1p1d-dep4-dep8-stp.yaml"`,
			`          - "SYNTHETIC_ACCEPTANCE=true"
          - "SYNTHETIC_ACCEPTANCE_LENGTH=3.01"
          - "CONFIG_FILE=recipes/trt-mtp.yaml"`)
	})
	s.ConfigKeys, s.RecipesRoot = []string{trt}, dir
	rep, err := Forecast(context.Background(), ForecastRequest{Sweep: s, Assumptions: forecast.DefaultAssumptions(),
		Clusters: []string{"../configs/clusters/slurm-emu.yaml"}})
	require.NoError(t, err)
	emu := rep.Clusters[0]
	require.Len(t, emu.NotForecast, 1, "%+v", emu.NotForecast)
	assert.Equal(t, forecast.FindingNoRender, emu.NotForecast[0].Kind)
	assert.Equal(t, 2, emu.NotForecast[0].Points)
	assert.Contains(t, emu.NotForecast[0].Reason, "recipes/trt-mtp.yaml does not launch on slurm-emu: ")
	assert.Zero(t, emu.Points)
	assert.Zero(t, emu.NodeHours)

	rep, err = Forecast(context.Background(), ForecastRequest{Sweep: s, Assumptions: forecast.DefaultAssumptions(),
		Clusters: []string{"../configs/clusters/local-sim.yaml"}})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Clusters[0].Points)
	assert.Empty(t, rep.Clusters[0].NotForecast)
}

// TestForecastCanaryBackends: the backends sweep on the GB200 rack has
// three images and backends, so three canaries, the ones `sweep start
// --canary` picks (each group's c8: no eval, 85 min on an allocation of
// its own). Without canaries: TensorRT-LLM c8 and c16 on one 3-node
// allocation, 20 + 2 x 65 + 10 (eval, no restart: no synthetic acceptance
// to drop) = 160 min; vLLM the same with an eval restart, 180 min; the
// router c8, 85 min on 2 nodes; everything fits at once: makespan 3:00,
// (160 + 180) x 3 + 85 x 2 = 1190 node-minutes. With canaries, the two
// c8s leave their deployments, so each c16 brings up once more on its own
// allocation: +2 bring-ups of 20 min on 3 nodes = +2.0 node-hours. The
// router's c8 is its group's only point: it runs as before. vLLM decides
// the makespan: its c8 canary (0:00-1:25), then its c16 alone, 20 + 65 +
// 20 + 10 = 115 min: 3:20, 0:20 (the c16's own bring-up) later. A failed
// TensorRT-LLM canary saves the c16: 95 min x 3 = 4.75 node-hours; vLLM's
// 115 x 3 = 5.75.
func TestForecastCanaryBackends(t *testing.T) {
	s, err := config.LoadSweep("../configs/sweeps/dsv4-gb200-backends.yaml")
	require.NoError(t, err)
	const cluster = "../configs/clusters/gb200-nvl72.yaml"
	rep, err := Forecast(context.Background(), ForecastRequest{Sweep: s, Assumptions: forecast.DefaultAssumptions(), Clusters: []string{cluster}})
	require.NoError(t, err)
	require.Len(t, rep.Clusters, 1)
	c := rep.Clusters[0]
	assert.InDelta(t, 1190.0/60, c.NodeHours, 1e-9)
	assert.InDelta(t, 3.0, c.MakespanHours, 1e-9)
	cf := c.Canary
	require.NotNil(t, cf)
	assert.False(t, cf.Headline)

	start, _, err := Build(Request{SweepFile: "../configs/sweeps/dsv4-gb200-backends.yaml", ClusterFile: cluster, Canary: true})
	require.NoError(t, err)
	require.Len(t, start.Canaries, 3)
	require.Len(t, cf.Groups, 3)
	type group struct {
		Backend                               string
		Conc, Nodes, Points                   int
		NodeHours, StartHours, EndHours, Save float64
	}
	var got []group
	for i, g := range cf.Groups {
		assert.Equal(t, start.Canaries[i].PointID, g.PointID, "the canary sweep start --canary picks")
		got = append(got, group{g.Backend, g.Conc, g.Nodes, g.Points, g.NodeHours, g.StartHours, g.EndHours, g.SavedNodeHours})
	}
	assert.Equal(t, []group{
		{"dynamo-trt", 8, 3, 2, 3 * 85.0 / 60, 0, 85.0 / 60, 3 * 95.0 / 60},
		{"dynamo-vllm", 8, 3, 2, 3 * 85.0 / 60, 0, 85.0 / 60, 3 * 115.0 / 60},
		{"dynamo-sglang", 8, 2, 1, 2 * 85.0 / 60, 0, 85.0 / 60, 0},
	}, got)
	assert.InDelta(t, 1190.0/60+2, cf.NodeHours, 1e-9)
	assert.InDelta(t, 2.0, cf.ExtraNodeHours, 1e-9)
	assert.Equal(t, []int{5, 2, 1, 0}, []int{cf.BringUps, cf.ExtraBringUps, cf.EvalRestarts, cf.ExtraEvalRestarts})
	assert.InDelta(t, 3+20.0/60, cf.MakespanHours, 1e-9)
	assert.InDelta(t, 20.0/60, cf.DelayHours, 1e-9)

	// --canary: the same comparison, the canary sweep's figures on top.
	rep, err = Forecast(context.Background(), ForecastRequest{Sweep: s, Assumptions: forecast.DefaultAssumptions(), Clusters: []string{cluster}, Canary: true})
	require.NoError(t, err)
	h := rep.Clusters[0]
	assert.True(t, h.Canary.Headline)
	assert.InDelta(t, cf.NodeHours, h.NodeHours, 1e-9)
	assert.InDelta(t, cf.MakespanHours, h.MakespanHours, 1e-9)
	require.NotEmpty(t, h.CriticalPath)
	assert.Equal(t, forecast.Step{Deployment: "B2", Canary: true, ConfigKey: "dsv4-fp4-gb200-dynamo-vllm-agentic-mtp-disagg", Topology: "1P1D DEP4/DEP8",
		Nodes: 3, Concs: []int{8}, StartHours: 0, EndHours: 85.0 / 60}, h.CriticalPath[0])
	assert.Len(t, h.CriticalPath, 2)
}

// TestForecastAdaptiveWorstCase: the forecast of the seed sweep with fill
// on its disagg key books the request's whole budget on the key's largest
// deployment (2P1D, 16 nodes): 3 points of 5 min warmup + 1 h perf, 16 x
// 65 min x 3 = 52 node-hours, no bring-up, and the sweep ends that much
// later (the key's deployments run lowest concurrency first). A node-hour
// budget below that stops at the points it pays for.
func TestForecastAdaptiveWorstCase(t *testing.T) {
	sw, err := config.LoadSweep("../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	plain, err := Forecast(context.Background(), ForecastRequest{Sweep: sw, Assumptions: forecast.DefaultAssumptions()})
	require.NoError(t, err)
	base := plain.Clusters[0]
	require.Nil(t, base.Adaptive)

	sw.Adaptive = []point.Adaptive{{ConfigKey: disaggKey, Mode: point.AdaptiveFill, MaxPoints: 3}}
	rep, err := Forecast(context.Background(), ForecastRequest{Sweep: sw, Assumptions: forecast.DefaultAssumptions()})
	require.NoError(t, err)
	c := rep.Clusters[0]
	require.NotNil(t, c.Adaptive)
	assert.Equal(t, 3, c.Adaptive.ExtraPoints)
	assert.Zero(t, c.Adaptive.ExtraBringUps)
	assert.InDelta(t, 16*65.0*3/60, c.Adaptive.ExtraNodeHours, 1e-9)
	assert.InDelta(t, base.NodeHours+52, c.NodeHours, 1e-9, "the headline includes the worst case")
	assert.Equal(t, base.BringUps, c.BringUps)
	assert.Equal(t, []forecast.AdaptiveKey{{ConfigKey: disaggKey, Mode: point.AdaptiveFill, Topology: "2P1D DEP16/DEP32", Points: 3, NodeHours: 52}}, c.Adaptive.Keys)
	assert.InDelta(t, base.MakespanHours+c.Adaptive.DelayHours, c.MakespanHours, 1e-9)
	assert.GreaterOrEqual(t, c.Adaptive.DelayHours, 3*65.0/60-1e-9, "the 2P1D deployment ends last: its added points add to the makespan")
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "adaptive points at worst (every budget spent; the figures above include them): +3 points, +52.0 node-hours, +0 bring-ups")

	// 40 node-hours pay for two such points (34.7), not three.
	sw.Adaptive[0].MaxNodeHours = 40
	rep, err = Forecast(context.Background(), ForecastRequest{Sweep: sw, Assumptions: forecast.DefaultAssumptions()})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Clusters[0].Adaptive.ExtraPoints)
}
