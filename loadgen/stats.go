package loadgen

import (
	"math"
	"slices"
	"sort"
)

// Method is how a percentile picks its value between the ranks of the data.
type Method int

const (
	// Linear interpolates between the closest ranks, numpy's default (rank
	// = (n-1)*p/100): the figures InferenceX publishes.
	Linear Method = iota
	// NearestRank is the smallest value with at least p% of the values at
	// or below it (rank ceil(n*p/100), 1-based): always a measured value,
	// as the ledger's queue waits and bring-up budgets want.
	NearestRank
)

// Percentile returns the p-th percentile (0..100) of sorted values with
// linear interpolation between closest ranks (PercentileBy, Linear). It
// returns 0 for no values, as the Python tools do with their `or 0`
// fallback.
func Percentile(sorted []float64, p float64) float64 { return PercentileBy(sorted, p, Linear) }

// PercentileBy returns the p-th percentile (0..100) of sorted values by
// method m; 0 for no values. Linear on integers (durations, counts)
// truncates toward zero.
func PercentileBy[T ~float64 | ~int | ~int64](sorted []T, p float64, m Method) T {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if m == NearestRank {
		k := int(math.Ceil(float64(n)*p/100)) - 1
		return sorted[max(0, min(k, n-1))]
	}
	pos := float64(n-1) * p / 100
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo < 0 {
		lo = 0
	}
	if hi >= n {
		hi = n - 1
	}
	return T(float64(sorted[lo]) + float64(sorted[hi]-sorted[lo])*(pos-float64(lo)))
}

// PercentileOf is PercentileBy of unsorted values (xs stays as it is).
func PercentileOf[T ~float64 | ~int | ~int64](xs []T, p float64, m Method) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return PercentileBy(s, p, m)
}

// Summary holds the statistics InferenceX publishes for one metric.
type Summary struct {
	Count  int
	Mean   float64
	Median float64
	Std    float64 // population standard deviation (numpy np.std, ddof=0)
	P50    float64
	P75    float64
	P90    float64
	P95    float64
	P99    float64
	P999   float64
}

// Summarize computes a Summary; it sorts values in place.
func Summarize(values []float64) Summary {
	s := Summary{Count: len(values)}
	if len(values) == 0 {
		return s
	}
	sort.Float64s(values)
	var sum float64
	for _, v := range values {
		sum += v
	}
	s.Mean = sum / float64(len(values))
	var sq float64
	for _, v := range values {
		d := v - s.Mean
		sq += d * d
	}
	s.Std = math.Sqrt(sq / float64(len(values)))
	s.Median = Percentile(values, 50)
	s.P50 = s.Median
	s.P75 = Percentile(values, 75)
	s.P90 = Percentile(values, 90)
	s.P95 = Percentile(values, 95)
	s.P99 = Percentile(values, 99)
	s.P999 = Percentile(values, 99.9)
	return s
}

// weighted is a value that occurs w times, so per-token ITL can be summarised
// exactly as if each chunk gap had been expanded into w equal samples without
// materialising them.
type weighted struct {
	v float64
	w int
}

// summarizeWeighted returns the same Summary Summarize would return for the
// expanded multiset. It sorts values in place.
func summarizeWeighted(values []weighted) Summary {
	var n int
	var sum float64
	for _, x := range values {
		n += x.w
		sum += x.v * float64(x.w)
	}
	s := Summary{Count: n}
	if n == 0 {
		return s
	}
	slices.SortFunc(values, func(a, b weighted) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	s.Mean = sum / float64(n)
	var sq float64
	for _, x := range values {
		d := x.v - s.Mean
		sq += d * d * float64(x.w)
	}
	s.Std = math.Sqrt(sq / float64(n))
	// cum[i] is the expanded length through values[i]; at(k) returns the k-th
	// element (0-based) of the expanded sorted multiset.
	cum := make([]int, len(values))
	run := 0
	for i, x := range values {
		run += x.w
		cum[i] = run
	}
	at := func(k int) float64 {
		i := sort.SearchInts(cum, k+1)
		if i >= len(values) {
			i = len(values) - 1
		}
		return values[i].v
	}
	pct := func(p float64) float64 {
		pos := float64(n-1) * p / 100
		lo := int(math.Floor(pos))
		hi := int(math.Ceil(pos))
		a, b := at(lo), at(hi)
		return a + (b-a)*(pos-float64(lo))
	}
	s.Median = pct(50)
	s.P50 = s.Median
	s.P75 = pct(75)
	s.P90 = pct(90)
	s.P95 = pct(95)
	s.P99 = pct(99)
	s.P999 = pct(99.9)
	return s
}
