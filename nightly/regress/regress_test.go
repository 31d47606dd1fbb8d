package regress

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
)

func pt(key string, ok bool, perf *Perf, eval *Eval) Point {
	status := "completed"
	if !ok {
		status = "failed"
	}
	return Point{Key: key, SweepID: "s", PointID: "p-" + key, Conc: 4, OK: ok, Status: status, Perf: perf, Eval: eval}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	base := &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 50}
	th := DefaultThresholds()
	cases := []struct {
		name  string
		cur   Point
		base  *Point
		th    Thresholds
		kinds []string
		pct   []float64
	}{
		{"unchanged", pt("a", true, base, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"throughput -4.9 % is within 5 %", pt("a", true, &Perf{OutputTputPerGPU: 951, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"throughput -6 %", pt("a", true, &Perf{OutputTputPerGPU: 940, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, []string{KindOutputTput}, []float64{-6}},
		{"throughput up is fine", pt("a", true, &Perf{OutputTputPerGPU: 2000, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"ttft +10 % exactly is within", pt("a", true, &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 220, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"ttft +20 %", pt("a", true, &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 240, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, []string{KindTTFT}, []float64{20}},
		{"ttft down is fine", pt("a", true, &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 100, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"interactivity -10 %", pt("a", true, &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 45}, nil), ptr(pt("a", true, base, nil)), th, []string{KindInteractivity}, []float64{-10}},
		{"a 1.2x slower engine trips all three", pt("a", true, &Perf{OutputTputPerGPU: 1000 / 1.2, TTFTp90Ms: 240.1, Interactivity: 50 / 1.2}, nil), ptr(pt("a", true, base, nil)), th,
			[]string{KindOutputTput, KindTTFT, KindInteractivity}, []float64{-16.67, 20.05, -16.67}},
		{"negative threshold turns a check off", pt("a", true, &Perf{OutputTputPerGPU: 500, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)),
			Thresholds{OutputTputPerGPUDropPct: -1, TTFTp90RisePct: 10, InteractivityDropPct: 5}, nil, nil},
		{"zero threshold flags any worsening", pt("a", true, &Perf{OutputTputPerGPU: 999, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)),
			Thresholds{}, []string{KindOutputTput}, []float64{-0.1}},
		{"no baseline: no perf findings", pt("a", true, &Perf{OutputTputPerGPU: 1, TTFTp90Ms: 1e9, Interactivity: 1}, nil), nil, th, nil, nil},
		{"baseline of another key is ignored", pt("a", true, &Perf{OutputTputPerGPU: 1, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("b", true, base, nil)), th, nil, nil},
		{"zero baseline figure is skipped", pt("a", true, &Perf{OutputTputPerGPU: 1, TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, &Perf{OutputTputPerGPU: 0, TTFTp90Ms: 200, Interactivity: 50}, nil)), th, nil, nil},
		{"NaN current is skipped", pt("a", true, &Perf{OutputTputPerGPU: math.NaN(), TTFTp90Ms: 200, Interactivity: 50}, nil), ptr(pt("a", true, base, nil)), th, nil, nil},
		{"eval below floor without baseline", pt("a", true, nil, &Eval{Score: 0.80, Floor: 0.85}), nil, th, []string{KindEvalBelowFloor}, []float64{0}},
		{"eval passing", pt("a", true, nil, &Eval{Score: 0.9, Floor: 0.85, Passed: true}), nil, th, nil, nil},
		{"new failure", pt("a", false, nil, nil), ptr(pt("a", true, base, nil)), th, []string{KindNewFailure}, []float64{0}},
		{"failing again is not new", pt("a", false, nil, nil), ptr(pt("a", false, nil, nil)), th, nil, nil},
		{"failing with no history is not new", pt("a", false, nil, nil), nil, th, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bl []Point
			if tc.base != nil {
				bl = []Point{*tc.base}
			}
			got := Compare([]Point{tc.cur}, bl, tc.th)
			require.Len(t, got, len(tc.kinds), "%+v", got)
			for i, f := range got {
				assert.Equal(t, tc.kinds[i], f.Kind)
				assert.InDelta(t, tc.pct[i], f.ChangePct, 0.01)
				assert.Equal(t, tc.cur.PointID, f.PointID)
				assert.Contains(t, f.Message, tc.cur.PointID)
				if tc.base != nil && tc.base.Key == tc.cur.Key {
					assert.Equal(t, "s", f.BaselineSweep)
				}
			}
		})
	}
}

func TestCountAndPoints(t *testing.T) {
	t.Parallel()
	fs := []Finding{{Kind: KindTTFT, PointID: "b"}, {Kind: KindOutputTput, PointID: "a"}, {Kind: KindTTFT, PointID: "a"}}
	assert.Equal(t, map[string]int{KindTTFT: 2, KindOutputTput: 1}, Count(fs))
	assert.Equal(t, []string{"a", "b"}, Points(fs))
	assert.Empty(t, Points(nil))
}

func ptr(p Point) *Point { return &p }

// A simulated figure is never judged against a real baseline (nor the other
// way round), nor against one measured under another profile: a 2x slower
// night compares with nothing rather than regressing.
func TestCompareOnlyComparableFigures(t *testing.T) {
	t.Parallel()
	base := &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 50}
	slow := &Perf{OutputTputPerGPU: 500, TTFTp90Ms: 400, Interactivity: 25}
	simSlow := *slow
	simSlow.Simulated = true
	withHash := func(p Point, h string) Point { p.ProfileHash = h; return p }
	th := DefaultThresholds()

	// Same flag and hash: a verdict.
	got := Compare([]Point{withHash(pt("a", true, slow, nil), "h1")}, []Point{withHash(pt("a", true, base, nil), "h1")}, th)
	assert.Len(t, got, 3)

	for name, tc := range map[string]struct {
		cur, base Point
		why       string
	}{
		"simulated vs real": {withHash(pt("a", true, &simSlow, nil), "h1"), withHash(pt("a", true, base, nil), "h1"), "simulated figures, the baseline's in s are real"},
		"another profile":   {withHash(pt("a", true, slow, nil), "h2"), withHash(pt("a", true, base, nil), "h1"), "measurement profile h2, the baseline's in s is h1"},
	} {
		assert.Equal(t, tc.why, Incomparable(tc.cur, tc.base), name)
		assert.Empty(t, Compare([]Point{tc.cur}, []Point{tc.base}, th), name)
	}
}

// TestCompareJoulesPerToken: a 20 % rise in joules per output token is a
// regression like a throughput drop (category more-energy); 5 % is within
// the default 10 %; a point whose power is invalid, now or in the
// baseline, is not compared on energy.
func TestCompareJoulesPerToken(t *testing.T) {
	t.Parallel()
	perf := func(j float64, valid bool) *Perf {
		return &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 50,
			Power: &energy.Figures{Source: energy.SourceSimulated, Valid: valid, JoulesPerOutputToken: j}}
	}
	base := pt("a", true, perf(2.0, true), nil)
	th := DefaultThresholds()
	fs := Compare([]Point{pt("a", true, perf(2.4, true), nil)}, []Point{base}, th)
	require.Len(t, fs, 1)
	assert.Equal(t, KindJoules, fs[0].Kind)
	assert.Equal(t, 20.0, fs[0].ChangePct)
	assert.Equal(t, 10.0, fs[0].ThresholdPct)
	assert.Equal(t, CategoryMoreEnergy, Category(fs[0].Kind))
	assert.Contains(t, fs[0].Message, "joules per output token 2 -> 2.4 J/token (+20.0 %, threshold 10 %)")
	assert.Empty(t, Compare([]Point{pt("a", true, perf(2.1, true), nil)}, []Point{base}, th), "+5 % is within 10 %")
	assert.Empty(t, Compare([]Point{pt("a", true, perf(0, false), nil)}, []Point{base}, th), "power-invalid now: not compared")
	assert.Empty(t, Compare([]Point{pt("a", true, perf(2.4, true), nil)}, []Point{pt("a", true, perf(0, false), nil)}, th), "power-invalid baseline")
	assert.Len(t, Compare([]Point{pt("a", true, perf(2.4, true), nil)}, []Point{base}, Thresholds{}), 1, "thresholds stored before the energy check have it at its default")
	off := -1.0
	assert.Empty(t, Compare([]Point{pt("a", true, perf(2.4, true), nil)}, []Point{base}, Thresholds{JoulesPerOutputTokenRisePct: &off}), "negative turns it off")
}
