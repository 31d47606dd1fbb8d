package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

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
