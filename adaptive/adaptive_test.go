package adaptive

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/point"
)

// model is a deployment's figures against concurrency.
type model func(conc int) point.PerfSummary

// linear is a server whose decode step grows with the batch: median E2EL
// a + b*conc seconds, interactivity falling as 1/E2EL.
func linear(a, b float64) model {
	return func(c int) point.PerfSummary {
		e2el := a + b*float64(c)
		return point.PerfSummary{E2ELMedianMs: e2el * 1000, Interactivity: 1000 / e2el, TTFTp99Ms: 100 * e2el,
			OutputTputPerGPU: float64(c) / e2el}
	}
}

type dep struct {
	key, topo  string
	nodes      int
	concs      []int
	recipeConc int
	m          model
}

func plan(key string, deps ...dep) []point.Spec {
	var out []point.Spec
	for _, d := range deps {
		for _, c := range d.concs {
			out = append(out, point.Spec{PointID: fmt.Sprintf("%s-c%d", d.key, c), ConfigKey: key, Topology: d.topo, Conc: c, Nodes: d.nodes,
				DeploymentHash: d.key, RecipeConc: d.recipeConc, DurationSec: 3600})
		}
	}
	return out
}

func byHash(p point.Spec) string { return p.DeploymentHash }

// runner plays a deployment's side: it measures its planned points, asks,
// measures what it is told to add, and asks again until told to stop.
type runner struct {
	t      *testing.T
	k      *Key
	points map[string][]Point
}

func newRunner(t *testing.T, req point.Adaptive, deps ...dep) *runner {
	k := NewKey(req)
	k.Observe(plan(req.ConfigKey, deps...), byHash)
	return &runner{t: t, k: k, points: map[string][]Point{}}
}

func (r *runner) measure(d dep, conc int, added bool) {
	r.points[d.key] = append(r.points[d.key], Point{PointID: fmt.Sprintf("%s-c%d", d.key, conc), Conc: conc, Added: added,
		Perf: d.m(conc), NodeMinutes: float64(d.nodes) * 10})
}

// run brings d up, measures its plan, then serves the search; it returns
// the concurrencies added to d and the final decision.
func (r *runner) run(d dep) ([]int, Decision) {
	r.k.Started(d.key)
	for _, c := range d.concs {
		r.measure(d, c, false)
	}
	var added []int
	for range 50 {
		dec := r.k.Ask(d.key, r.points[d.key], true, "")
		if dec.Conc == 0 {
			r.k.Ended(d.key, "")
			return added, dec
		}
		require.Equal(r.t, d.key, dec.Added.Deployment)
		r.k.Name(fmt.Sprintf("%s-c%d", d.key, dec.Conc))
		added = append(added, dec.Conc)
		r.measure(d, dec.Conc, true)
	}
	r.t.Fatal("the search never stopped")
	return nil, Decision{}
}

// A hole like the seed's (20 s -> 100 s of median E2EL between two
// planned points of one deployment) fills within the factor in at most 3
// added points, each inside the hole and on that deployment.
func TestFillClosesAHole(t *testing.T) {
	d := dep{key: "d1", topo: "2P1D DEP16/DEP32", nodes: 16, concs: []int{90, 700}, m: linear(8, 0.132)}
	require.InDelta(t, 20, d.m(90).E2ELMedianMs/1000, 0.2)
	require.InDelta(t, 100, d.m(700).E2ELMedianMs/1000, 0.5)
	r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}, d)
	added, last := r.run(d)
	require.NotEmpty(t, added)
	require.LessOrEqual(t, len(added), 3)
	for _, c := range added {
		require.Greater(t, c, 90)
		require.Less(t, c, 700)
	}
	require.Empty(t, r.k.Gaps(), "no gap wider than the factor is left")
	require.Contains(t, last.Reason, "no gap wider than x2")
	// coverage on the same curve agrees: one rule, one implementation.
	res, err := curvegaps.Find([]curvegaps.Curve{r.k.Curve()}, curvegaps.DefaultFactor)
	require.NoError(t, err)
	require.Empty(t, res.Gaps)
	// The first added point is what `starter coverage` suggested first.
	first, err := curvegaps.Find([]curvegaps.Curve{{Key: "k", Points: []curvegaps.Point{
		{Conc: 90, E2ELSeconds: d.m(90).E2ELMedianMs / 1000, Interactivity: d.m(90).Interactivity},
		{Conc: 700, E2ELSeconds: d.m(700).E2ELMedianMs / 1000, Interactivity: d.m(700).Interactivity}}}}, 2)
	require.NoError(t, err)
	require.Equal(t, first.Gaps[0].SuggestConc[0], added[0])
	require.Len(t, r.k.Added, len(added))
	for i, a := range r.k.Added {
		require.Equal(t, i+1, a.Added.Seq)
		require.Equal(t, point.AdaptiveFill, a.Added.Mode)
		require.NotNil(t, a.Added.Gap)
		require.Contains(t, a.Added.Reason, "next to 2P1D DEP16/DEP32, whose server is up")
		require.NotEmpty(t, a.PointID)
	}
}

// The seed's hole lies between two deployments: 1P1D c256 (a recipe sized
// for c256) and 2P1D c768-c1280 (sized for c1280). The 2P1D deployment can
// serve it only if it comes up after c256 is measured; the 1P1D one may
// not go above its recipe.
func TestFillAcrossDeployments(t *testing.T) {
	low := dep{key: "b5", topo: "1P1D DEP16/DEP32", nodes: 12, concs: []int{256}, recipeConc: 256, m: linear(4, 0.0625)}
	high := dep{key: "b6", topo: "2P1D DEP16/DEP32", nodes: 16, concs: []int{768, 1024, 1280}, recipeConc: 1280, m: linear(-50, 0.195)}
	require.InDelta(t, 20, low.m(256).E2ELMedianMs/1000, 0.1)
	require.InDelta(t, 100, high.m(768).E2ELMedianMs/1000, 0.3)
	req := point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3}

	t.Run("2P1D first", func(t *testing.T) {
		r := newRunner(t, req, high, low)
		added, last := r.run(high)
		require.Empty(t, added)
		require.Contains(t, last.Reason, "no gap", "c256 is not measured yet: no gap known")
		added, last = r.run(low)
		require.Empty(t, added)
		require.Contains(t, last.Reason, "above 1P1D DEP16/DEP32's recipe (sized for c256)")
		require.NotEmpty(t, r.k.Gaps(), "the hole stays, and the sweep says why")
	})
	t.Run("1P1D first", func(t *testing.T) {
		r := newRunner(t, req, low, high)
		added, last := r.run(low)
		require.Empty(t, added)
		require.Contains(t, last.Reason, "no gap")
		added, _ = r.run(high)
		require.NotEmpty(t, added)
		for _, c := range added {
			require.True(t, c > 256 && c < 768, "%d", c)
		}
		for _, a := range r.k.Added {
			require.Equal(t, "b6", a.Added.Deployment)
			require.True(t, a.Added.Gap.FromConc >= 256 && a.Added.Gap.ToConc <= 768, "%+v", a.Added.Gap)
		}
	})
	t.Run("a gap waits for a concurrency still to be measured", func(t *testing.T) {
		mid := dep{key: "b5b", topo: "1P1D DEP16/DEP32 b", nodes: 12, concs: []int{512}, m: linear(4, 0.0625)}
		r := newRunner(t, req, low, high, mid)
		r.run(low)
		_, last := r.run(high)
		require.Contains(t, last.Reason, "waits for c512")
	})
}

// An orphan gap (both neighbours gone) goes to the next deployment of the
// key that comes up, within its recipe.
func TestFillOrphanGap(t *testing.T) {
	a := dep{key: "a", topo: "A", nodes: 2, concs: []int{10}, m: linear(1, 0.5)}
	b := dep{key: "b", topo: "B", nodes: 2, concs: []int{1000}, m: linear(1, 0.5)}
	c := dep{key: "c", topo: "C", nodes: 4, concs: []int{2000}, m: linear(1, 0.5)}
	r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 1}, a, b, c)
	// a and b run side by side and both stop before the other reported.
	r.k.Started("a")
	r.k.Started("b")
	r.measure(a, 10, false)
	r.measure(b, 1000, false)
	require.Zero(t, r.k.Ask("a", r.points["a"], true, "").Conc)
	r.k.Ended("a", "")
	// b would see the gap 10 -> 1000 next to itself, but its server is gone.
	dec := r.k.Ask("b", r.points["b"], false, "point b-c1000 failed at perf")
	require.Zero(t, dec.Conc)
	require.Contains(t, dec.Reason, "server torn down: point b-c1000 failed at perf")
	r.k.Ended("b", "")
	added, _ := r.run(c)
	require.Len(t, added, 1, "the budget of one point")
	require.True(t, added[0] > 10 && added[0] < 1000, "%d", added[0])
	require.Contains(t, r.k.Added[0].Added.Reason, "the deployments next to it are gone, C came up next")
}

func TestBudget(t *testing.T) {
	d := dep{key: "d", topo: "T", nodes: 16, concs: []int{1, 1000}, m: linear(1, 1)}
	t.Run("points", func(t *testing.T) {
		r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 2}, d)
		added, last := r.run(d)
		require.Len(t, added, 2)
		require.Contains(t, last.Reason, "budget spent: 2 of 2 added points")
		require.NotEmpty(t, r.k.Gaps())
	})
	t.Run("node-hours", func(t *testing.T) {
		// Each point holds 16 nodes x 10 min = 160 node-minutes; 6
		// node-hours allow two added points (320) but not a third (480).
		r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 10, MaxNodeHours: 6}, d)
		added, last := r.run(d)
		require.Len(t, added, 2)
		require.Contains(t, last.Reason, "node-hour budget: 5.33 of 6 node-hours spent")
		require.InDelta(t, 320, r.k.NodeMinutes, 1e-9)
	})
	t.Run("before any point ran, the row's duration", func(t *testing.T) {
		k := NewKey(point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 10, MaxNodeHours: 15})
		k.Observe(plan("k", d), byHash)
		dec := k.Ask("d", nil, true, "")
		require.Zero(t, dec.Conc)
		require.Contains(t, dec.Reason, "would hold about 16.00", "16 nodes x the row's 60 minutes")
	})
}

// The forecast's worst case books the whole budget on the key's largest
// deployment, whatever the figures.
func TestWorstCase(t *testing.T) {
	small := dep{key: "s", topo: "S", nodes: 2, concs: []int{4}, m: linear(1, 0)}
	big := dep{key: "b", topo: "B", nodes: 16, concs: []int{768}, m: linear(1, 0)}
	r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3, WorstCase: true}, small, big)
	added, last := r.run(small)
	require.Empty(t, added)
	require.Contains(t, last.Reason, "the budget goes to B")
	added, _ = r.run(big)
	require.Equal(t, []int{769, 770, 771}, added)
}

// slo on a monotone curve finds what a brute-force scan of every grid
// candidate finds, with fewer points.
func TestSLOMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	total, totalBrute := 0, 0
	for trial := range 300 {
		a, b := 1+rng.Float64()*20, 0.01+rng.Float64()*0.5
		d := dep{key: "d", topo: "2P1D", nodes: 16, concs: []int{768, 1024, 1280}, recipeConc: 1280, m: linear(a, b)}
		max := 20 + rng.Float64()*600
		req := point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveSLO, SLO: &point.SLO{Metric: point.SLOE2ELMedian, Max: max},
			Grid: point.Grid{Min: 64, Max: 2048, Step: 64}, MaxPoints: 20}
		r := newRunner(t, req, d)
		added, last := r.run(d)
		f := r.k.Deployments[0].Found
		require.NotNil(t, f)

		// Brute force: every candidate of the same grid, measured.
		brute := 0
		grid := r.k.Grid(&r.k.Deployments[0])
		require.Equal(t, 1280, grid[len(grid)-1], "the grid stops at the recipe's claim")
		for _, c := range grid {
			if v, _ := req.SLO.Value(ptr(d.m(c))); req.SLO.Meets(v) {
				brute = c
			}
		}
		if brute == 0 {
			require.True(t, f.Conc == 0 || f.Conc < 64, "trial %d: brute force finds none, search %d", trial, f.Conc)
			continue
		}
		require.LessOrEqual(t, math.Abs(float64(f.Conc-brute)), 64.0, "trial %d: search c%d, brute force c%d (%s)", trial, f.Conc, brute, last.Reason)
		require.GreaterOrEqual(t, f.Conc, brute, "on a monotone curve the search finds brute force's concurrency or a planned point above it")
		require.Contains(t, last.Reason, "slo done")
		total += len(added) + len(d.concs)
		totalBrute += len(grid)
	}
	require.Less(t, total, totalBrute/2, "the search needs far fewer points than a scan")
	t.Logf("slo search: %d points in all, brute force %d", total, totalBrute)
}

func ptr(p point.PerfSummary) *point.PerfSummary { return &p }

// Brackets both ways: all planned points miss (search below), all meet
// (search above, up to the grid's top).
func TestSLOBrackets(t *testing.T) {
	d := dep{key: "d", topo: "T", nodes: 4, concs: []int{512}, m: linear(0, 0.1)} // E2EL = conc/10 s
	req := func(max float64) point.Adaptive {
		return point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveSLO, SLO: &point.SLO{Metric: point.SLOE2ELMedian, Max: max},
			Grid: point.Grid{Min: 32, Max: 1024, Step: 32}, MaxPoints: 10}
	}
	r := newRunner(t, req(10), d) // meets up to c100: c96 on the grid
	added, _ := r.run(d)
	require.Equal(t, 96, r.k.Deployments[0].Found.Conc)
	require.Equal(t, 256, added[0], "first probe halves below the failing c512")
	r = newRunner(t, req(1000), d) // everything meets: the grid's top
	added, last := r.run(d)
	require.Equal(t, 1024, r.k.Deployments[0].Found.Conc)
	require.Equal(t, []int{1024}, added)
	require.Contains(t, last.Reason, "c1024 is the largest concurrency meeting median_e2el <= 1000 s")
	r = newRunner(t, req(1), d) // nothing meets
	_, last = r.run(d)
	require.Zero(t, r.k.Deployments[0].Found.Conc)
	require.Contains(t, last.Reason, "no measured concurrency meets")
}

// slo is per deployment: a concurrency another deployment planned is
// probed here all the same; a deployment outside the topology is not searched.
func TestSLOPerDeployment(t *testing.T) {
	a := dep{key: "a", topo: "A", nodes: 4, concs: []int{64}, m: linear(0, 0.1)}
	b := dep{key: "b", topo: "B", nodes: 4, concs: []int{128}, m: linear(0, 0.1)}
	req := point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveSLO, Topology: "A", SLO: &point.SLO{Metric: point.SLOE2ELMedian, Max: 20},
		Grid: point.Grid{Min: 64, Max: 256, Step: 64}, MaxPoints: 10}
	r := newRunner(t, req, a, b)
	added, _ := r.run(a)
	require.Contains(t, added, 128)
	require.Equal(t, 192, r.k.Deployments[0].Found.Conc)
	added, last := r.run(b)
	require.Empty(t, added)
	require.Contains(t, last.Reason, "not searched: the request names topology A")
}

// The same reports give the same decisions (what replay relies on).
func TestDeterministic(t *testing.T) {
	decide := func() []AddedPoint {
		d := dep{key: "d", topo: "T", nodes: 16, concs: []int{90, 700}, m: linear(8, 0.132)}
		e := dep{key: "e", topo: "E", nodes: 2, concs: []int{1, 4}, m: linear(3, 0.5)}
		r := newRunner(t, point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3, Factor: 1.5}, e, d)
		r.run(e)
		r.run(d)
		return slices.Clone(r.k.Added)
	}
	first := decide()
	require.NotEmpty(t, first)
	for range 20 {
		require.Equal(t, first, decide())
	}
}
