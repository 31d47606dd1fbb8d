package regress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/results"
)

func TestFromResults(t *testing.T) {
	t.Parallel()
	pts := []results.Point{
		{PointID: "a", ConfigKey: "k", Conc: 4, Status: "completed", BaselineKey: "ka-c4"},
		{PointID: "b", ConfigKey: "k", Conc: 8, Status: "failed", BaselineKey: "kb-c8"},
		{PointID: "c", ConfigKey: "k", Conc: 16, Status: "eval-failed", BaselineKey: "kc-c16"},
	}
	perf := []results.PerfResult{
		{PointID: "a", ConfigKey: "k", Conc: 4, PerfSummary: Perf{OutputTputPerGPU: 100, TTFTp90Ms: 20, Interactivity: 50}},
		{PointID: "c", ConfigKey: "k", Conc: 16, PerfSummary: Perf{OutputTputPerGPU: 300}},
		{PointID: "old", ConfigKey: "k2", Conc: 2, Identity: "dep-c2", PerfSummary: Perf{OutputTputPerGPU: 7}}, // no point row
	}
	evals := []results.EvalResult{{PointID: "c", EMStrict: 0.8, Floor: 0.9, Passed: false}}
	got := FromResults("sw", pts, perf, evals)
	require.Len(t, got, 4)
	tests := []struct {
		i      int
		key    string
		ok     bool
		status string
		perf   *Perf
		eval   *Eval
	}{
		{0, "ka-c4", true, "completed", &Perf{OutputTputPerGPU: 100, TTFTp90Ms: 20, Interactivity: 50}, nil},
		{1, "kb-c8", false, "failed", nil, nil},
		{2, "kc-c16", true, "eval-failed", &Perf{OutputTputPerGPU: 300}, &Eval{Score: 0.8, Floor: 0.9}},
		{3, "identity:dep-c2", true, "completed", &Perf{OutputTputPerGPU: 7}, nil},
	}
	for _, tc := range tests {
		p := got[tc.i]
		assert.Equal(t, tc.key, p.Key)
		assert.Equal(t, "sw", p.SweepID)
		assert.Equal(t, tc.ok, p.OK, p.Key)
		assert.Equal(t, tc.status, p.Status, p.Key)
		assert.Equal(t, tc.perf, p.Perf, p.Key)
		assert.Equal(t, tc.eval, p.Eval, p.Key)
	}
}

func TestCompareRuns(t *testing.T) {
	t.Parallel()
	perf := &Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 50}
	mk := func(key string, ok bool, p *Perf, e *Eval) Point {
		return Point{Key: key, SweepID: "s", PointID: key, OK: ok, Status: map[bool]string{true: "completed", false: "failed"}[ok], Perf: p, Eval: e}
	}
	tests := []struct {
		name     string
		cur      []Point
		base     []Point
		evalDrop float64
		kinds    []string
	}{
		{name: "same run: nothing", cur: []Point{mk("a", true, perf, &Eval{0.95, 0.9, true})}, base: []Point{mk("a", true, perf, &Eval{0.95, 0.9, true})}, evalDrop: 2},
		{name: "eval down 3 points", cur: []Point{mk("a", true, perf, &Eval{0.92, 0.9, true})}, base: []Point{mk("a", true, perf, &Eval{0.95, 0.9, true})}, evalDrop: 2,
			kinds: []string{KindEvalDrop}},
		{name: "eval down 1.5 points is noise", cur: []Point{mk("a", true, perf, &Eval{0.935, 0.9, true})}, base: []Point{mk("a", true, perf, &Eval{0.95, 0.9, true})}, evalDrop: 2},
		{name: "eval drop check off", cur: []Point{mk("a", true, perf, &Eval{0.5, 0.1, true})}, base: []Point{mk("a", true, perf, &Eval{0.95, 0.1, true})}, evalDrop: -1},
		{name: "below floor is its own kind, not also a drop", cur: []Point{mk("a", true, perf, &Eval{0.85, 0.9, false})}, base: []Point{mk("a", true, perf, &Eval{0.95, 0.9, true})}, evalDrop: 2,
			kinds: []string{KindEvalBelowFloor}},
		{name: "missing point", cur: []Point{mk("a", true, perf, nil)}, base: []Point{mk("a", true, perf, nil), mk("b", true, perf, nil)}, evalDrop: 2,
			kinds: []string{KindMissing}},
		{name: "a baseline failure that is gone now is not missing", cur: nil, base: []Point{mk("b", false, nil, nil)}, evalDrop: 2},
		{name: "slower and newly failing", cur: []Point{mk("a", true, &Perf{OutputTputPerGPU: 800, TTFTp90Ms: 200, Interactivity: 50}, nil), mk("b", false, nil, nil)},
			base: []Point{mk("a", true, perf, nil), mk("b", true, perf, nil)}, evalDrop: 2, kinds: []string{KindOutputTput, KindNewFailure}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := CompareRuns(tc.cur, tc.base, DefaultThresholds(), tc.evalDrop)
			var kinds []string
			for _, f := range fs {
				kinds = append(kinds, f.Kind)
				assert.NotEmpty(t, f.Message)
			}
			assert.Equal(t, tc.kinds, kinds)
		})
	}
}

func TestCategoryRowsDelta(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{KindOutputTput: CategorySlower, KindTTFT: CategorySlower, KindInteractivity: CategorySlower,
		KindEvalDrop: CategoryLessAccurate, KindEvalBelowFloor: CategoryEvalBelowFloor, KindNewFailure: CategoryNewlyFailing, KindMissing: CategoryMissing, "other": "other"} {
		assert.Equal(t, want, Category(kind), kind)
	}
	cur := []Point{{Key: "a", PointID: "a"}, {Key: "n", PointID: "n"}}
	base := []Point{{Key: "a", PointID: "a"}, {Key: "m", PointID: "m"}}
	rows := Rows(cur, base, []Finding{{Kind: KindMissing, PointID: "m"}, {Kind: KindTTFT, PointID: "a"}})
	require.Len(t, rows, 3)
	assert.Equal(t, []string{"a", "n", "m"}, []string{rows[0].Key, rows[1].Key, rows[2].Key})
	assert.NotNil(t, rows[0].Baseline)
	assert.Nil(t, rows[1].Baseline)
	assert.Nil(t, rows[2].Current)
	assert.Len(t, rows[0].Findings, 1)
	assert.Len(t, rows[2].Findings, 1)

	d, ok := Delta(200, 150)
	assert.True(t, ok)
	assert.InDelta(t, -25, d, 1e-9)
	_, ok = Delta(0, 1)
	assert.False(t, ok)
}
