// Package curvegaps finds where a sweep's latency curves are too sparse to
// read: two neighbouring measured concurrencies whose median E2EL, or whose
// median interactivity, differ by more than a factor. For each such gap it
// suggests the concurrencies to add, before anyone spends GPU time again.
//
// Metrics (the names the JSON carries):
//   - "median_e2el": median end-to-end latency in seconds, as agg_bmk.json's
//     median_e2el (agentic rows: request_metrics.latency.e2el.p50);
//   - "median_intvty": median interactivity in tok/s/user, 1000/median TPOT
//     ms, as agg_bmk.json's median_intvty (agentic: latency.intvty.p50).
//
// Interpolation is log-linear in concurrency: log(metric) is taken as linear
// in log(conc) between the two measured points, the power law a saturated
// server follows. Targets split the gap into equal ratios no larger than the
// factor, which makes the suggested concurrencies a geometric series.
package curvegaps

import (
	"fmt"
	"math"
	"sort"
)

// Metric names in the output.
const (
	MetricE2EL   = "median_e2el"
	MetricIntvty = "median_intvty"
)

// DefaultFactor is the largest ratio allowed between neighbouring points.
const DefaultFactor = 2.0

// Point is one measured concurrency of a curve. A metric that is zero or
// negative was not measured and is left out of that metric's gaps.
type Point struct {
	Conc          int
	E2ELSeconds   float64
	Interactivity float64 // tok/s/user
}

// Curve is one config key's points (or, for rows without a key, one
// InferenceX chart group's).
type Curve struct {
	Key    string
	Points []Point
}

// End is one side of a gap.
type End struct {
	Conc  int     `json:"conc"`
	Value float64 `json:"value"`
}

// Gap is a stretch of a curve wider than the factor.
type Gap struct {
	ConfigKey   string `json:"config_key"`
	Metric      string `json:"metric"`
	From        End    `json:"from"`
	To          End    `json:"to"`
	SuggestConc []int  `json:"suggest_conc"`
}

// Ratio is the gap's width: the larger value over the smaller.
func (g Gap) Ratio() float64 { return ratio(g.From.Value, g.To.Value) }

// Result is the JSON document `starter coverage --json` prints.
type Result struct {
	Gaps []Gap `json:"gaps"`
}

var metrics = []struct {
	name  string
	value func(Point) float64
}{
	{MetricE2EL, func(p Point) float64 { return p.E2ELSeconds }},
	{MetricIntvty, func(p Point) float64 { return p.Interactivity }},
}

// Find returns every gap wider than factor, in curve order (by key), E2EL
// before interactivity, then by concurrency.
func Find(curves []Curve, factor float64) (Result, error) {
	if !(factor > 1) || math.IsInf(factor, 0) {
		return Result{}, fmt.Errorf("coverage: factor must be a finite number above 1, got %v", factor)
	}
	sorted := append([]Curve(nil), curves...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	res := Result{Gaps: []Gap{}}
	for _, c := range sorted {
		for _, m := range metrics {
			res.Gaps = append(res.Gaps, curveGaps(c, m.name, m.value, factor)...)
		}
	}
	return res, nil
}

// curveGaps walks neighbouring concurrencies. A curve across parallelism
// shapes can hold several points at one concurrency; there the closest pair
// of the two levels decides, because a value already measured at either
// level covers that part of the axis.
func curveGaps(c Curve, metric string, value func(Point) float64, factor float64) []Gap {
	// Concurrencies collected in a slice, not by ranging over the map: the
	// sweep workflow calls this too (package adaptive), and workflowcheck
	// refuses map iteration there.
	levels := map[int][]float64{}
	var concs []int
	for _, p := range c.Points {
		if v := value(p); p.Conc > 0 && v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			if _, seen := levels[p.Conc]; !seen {
				concs = append(concs, p.Conc)
			}
			levels[p.Conc] = append(levels[p.Conc], v)
		}
	}
	sort.Ints(concs)
	var gaps []Gap
	for i := 1; i < len(concs); i++ {
		a, b := concs[i-1], concs[i]
		va, vb := closest(levels[a], levels[b])
		if ratio(va, vb) <= factor*(1+1e-9) {
			continue
		}
		from, to := End{a, va}, End{b, vb}
		gaps = append(gaps, Gap{ConfigKey: c.Key, Metric: metric, From: from, To: to, SuggestConc: Suggest(from, to, factor)})
	}
	return gaps
}

// closest picks the pair, one value from each level, with the smallest ratio.
func closest(as, bs []float64) (float64, float64) {
	ba, bb, best := as[0], bs[0], math.Inf(1)
	for _, a := range as {
		for _, b := range bs {
			if r := ratio(a, b); r < best {
				ba, bb, best = a, b, r
			}
		}
	}
	return ba, bb
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return math.Inf(1)
	}
	return math.Max(a, b) / math.Min(a, b)
}

// Suggest returns the concurrencies strictly between from and to that split
// the gap into steps no wider than factor, under the log-log interpolation:
// n = ceil(log(ratio)/log(factor)) steps, the k-th at
// conc = from·(to/from)^(k/n). Concurrencies are integers, so a gap between
// neighbouring integers (c1 and c2) gets no suggestion, and rounding can
// merge two targets; the result is sorted and never nil.
func Suggest(from, to End, factor float64) []int {
	out := []int{}
	if from.Conc > to.Conc {
		from, to = to, from
	}
	r := ratio(from.Value, to.Value)
	if from.Conc <= 0 || to.Conc-from.Conc < 2 || math.IsInf(r, 0) || !(factor > 1) {
		return out
	}
	n := int(math.Ceil(math.Log(r)/math.Log(factor) - 1e-9))
	span := float64(to.Conc) / float64(from.Conc)
	last := from.Conc
	for k := 1; k < n; k++ {
		c := int(math.Round(float64(from.Conc) * math.Pow(span, float64(k)/float64(n))))
		if c <= last || c >= to.Conc {
			continue
		}
		out = append(out, c)
		last = c
	}
	return out
}

// Predict is the interpolated metric at conc between two measured ends; the
// report uses it to place a suggested concurrency on the chart.
func Predict(from, to End, conc int) float64 {
	if from.Conc == to.Conc || from.Value <= 0 || to.Value <= 0 || conc <= 0 {
		return math.NaN()
	}
	t := math.Log(float64(conc)/float64(from.Conc)) / math.Log(float64(to.Conc)/float64(from.Conc))
	return from.Value * math.Pow(to.Value/from.Value, t)
}

// Collector groups points into curves by key, in first-seen order.
type Collector struct {
	order []string
	by    map[string]*Curve
}

// Add puts one measured point on key's curve.
func (c *Collector) Add(key string, p Point) {
	if c.by == nil {
		c.by = map[string]*Curve{}
	}
	cv, ok := c.by[key]
	if !ok {
		cv = &Curve{Key: key}
		c.by[key] = cv
		c.order = append(c.order, key)
	}
	cv.Points = append(cv.Points, p)
}

// Curves returns the collected curves.
func (c *Collector) Curves() []Curve {
	out := make([]Curve, 0, len(c.order))
	for _, k := range c.order {
		out = append(out, *c.by[k])
	}
	return out
}

// SuggestByKey merges a result's suggestions per config key (E2EL and
// interactivity gaps often ask for nearby concurrencies on one curve).
func (r Result) SuggestByKey() map[string][]int {
	seen := map[string]map[int]bool{}
	out := map[string][]int{}
	for _, g := range r.Gaps {
		if seen[g.ConfigKey] == nil {
			seen[g.ConfigKey] = map[int]bool{}
		}
		for _, c := range g.SuggestConc {
			if !seen[g.ConfigKey][c] {
				seen[g.ConfigKey][c] = true
				out[g.ConfigKey] = append(out[g.ConfigKey], c)
			}
		}
	}
	for k := range out {
		sort.Ints(out[k])
	}
	return out
}
