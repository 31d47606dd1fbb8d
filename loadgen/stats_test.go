package loadgen

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentileMatchesNumpyLinear(t *testing.T) {
	t.Parallel()
	// Expected values computed by hand with rank = (n-1)*p/100, which is
	// what np.percentile(x, p) returns by default.
	cases := []struct {
		name   string
		values []float64
		p      float64
		want   float64
	}{
		{"empty is 0", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"median even", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90", []float64{1, 2, 3, 4}, 90, 3.7},
		{"p99", []float64{1, 2, 3, 4}, 99, 3.97},
		{"p99.9", []float64{1, 2, 3, 4}, 99.9, 3.997},
		{"p0", []float64{1, 2, 3, 4}, 0, 1},
		{"p100", []float64{1, 2, 3, 4}, 100, 4},
		{"p75 of 5", []float64{10, 20, 30, 40, 50}, 75, 40},
		{"p95 of 5", []float64{10, 20, 30, 40, 50}, 95, 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, Percentile(tc.values, tc.p), 1e-12)
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	s := Summarize([]float64{4, 1, 3, 2})
	assert.Equal(t, 4, s.Count)
	assert.InDelta(t, 2.5, s.Mean, 1e-12)
	assert.InDelta(t, 2.5, s.Median, 1e-12)
	assert.InDelta(t, math.Sqrt(1.25), s.Std, 1e-12, "population std (ddof=0)")
	assert.InDelta(t, 3.7, s.P90, 1e-12)
	assert.InDelta(t, 3.97, s.P99, 1e-12)
	assert.InDelta(t, 3.997, s.P999, 1e-12)
	assert.Equal(t, Summary{}, Summarize(nil))
}

func TestSummarizeWeightedEqualsExpanded(t *testing.T) {
	t.Parallel()
	// Hand case: {1 x2, 3 x1} = [1 1 3].
	s := summarizeWeighted([]weighted{{3, 1}, {1, 2}})
	assert.Equal(t, 3, s.Count)
	assert.InDelta(t, 5.0/3, s.Mean, 1e-12)
	assert.InDelta(t, 1, s.Median, 1e-12)
	assert.InDelta(t, 2.6, s.P90, 1e-12)
	assert.InDelta(t, math.Sqrt(8.0/9), s.Std, 1e-12)

	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		var ws []weighted
		var flat []float64
		for i := 0; i < 1+rng.IntN(30); i++ {
			w := weighted{v: float64(rng.IntN(20)), w: rng.IntN(4)}
			ws = append(ws, w)
			for j := 0; j < w.w; j++ {
				flat = append(flat, w.v)
			}
		}
		got := summarizeWeighted(ws)
		want := Summarize(flat)
		require.Equal(t, want.Count, got.Count)
		for _, pair := range [][2]float64{
			{want.Mean, got.Mean}, {want.Median, got.Median}, {want.Std, got.Std}, {want.P75, got.P75},
			{want.P90, got.P90}, {want.P99, got.P99}, {want.P999, got.P999},
		} {
			require.InDelta(t, pair[0], pair[1], 1e-9, "trial %d: %v", trial, flat)
		}
	}
}

// TestPercentileOf: unsorted input of any numeric type, by both methods.
// The nearest-rank figures are the ledger's (accounting's queue and
// bring-up percentiles, plan/budgetcheck's bring-up p90), the linear ones
// `starter bench orchestration`'s.
func TestPercentileOf(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	assert.Equal(t, time.Duration(5), PercentileOf(ds, 50, NearestRank))
	assert.Equal(t, time.Duration(9), PercentileOf(ds, 90, NearestRank))
	assert.Equal(t, time.Duration(0), PercentileOf([]time.Duration(nil), 90, NearestRank))
	assert.Equal(t, []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, ds, "the input keeps its order")
	min := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Minute)
		}
		return out
	}
	assert.Equal(t, 7*time.Minute, PercentileOf(min(7), 90, NearestRank))
	// 10 runs: the 9th smallest.
	assert.Equal(t, 19*time.Minute, PercentileOf(min(20, 11, 12, 13, 14, 15, 16, 17, 18, 19), 90, NearestRank))
	// 5 runs: rank ceil(4.5) = 5, the largest.
	assert.Equal(t, 30*time.Minute, PercentileOf(min(10, 30, 12, 11, 13), 90, NearestRank))

	for _, tt := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 99, 7},
		{[]float64{3, 1, 2}, 50, 2},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, 90, 9.1},
	} {
		assert.InDelta(t, tt.want, PercentileOf(tt.xs, tt.p, Linear), 1e-9, "%v p%v", tt.xs, tt.p)
	}
	assert.Equal(t, 2, PercentileOf([]int{4, 1, 2, 3}, 50, Linear), "2.5 truncated")
}
