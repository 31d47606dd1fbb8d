package regress

import (
	"fmt"
	"math"
	"sort"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// Kinds that CompareRuns adds to Compare's.
const (
	// KindMissing: the baseline has the point, the current run has no
	// result for it at all (not even a failed status).
	KindMissing = "missing"
	// KindEvalDrop: the eval still passes its floor but scores more than
	// the allowed points below the baseline.
	KindEvalDrop = "eval_score_drop"
)

// Categories group finding kinds the way the report and the nightly summary
// name them.
const (
	CategorySlower         = "slower"
	CategoryMoreEnergy     = "more-energy"
	CategoryLessAccurate   = "less-accurate"
	CategoryEvalBelowFloor = "eval-below-floor"
	CategoryNewlyFailing   = "newly-failing"
	CategoryMissing        = "missing"
)

// Category maps a finding kind to its category.
func Category(kind string) string {
	switch kind {
	case KindOutputTput, KindTTFT, KindInteractivity:
		return CategorySlower
	case KindJoules:
		return CategoryMoreEnergy
	case KindEvalDrop:
		return CategoryLessAccurate
	case KindEvalBelowFloor:
		return CategoryEvalBelowFloor
	case KindNewFailure:
		return CategoryNewlyFailing
	case KindMissing:
		return CategoryMissing
	}
	return kind
}

// DefaultEvalDropPts is how many percentage points of GSM8K exact match a
// passing eval may lose against its baseline before it counts as less
// accurate: about two standard errors on the 1319-question split.
const DefaultEvalDropPts = 2.0

// okStatuses are the point statuses whose figures exist.
func okStatus(status string) bool { return status == "" || point.HasFigures(status) }

// FromResults builds a run's comparable points from the results store's
// rows, keyed by the points' baseline keys (point.BaselineKey: the identity
// apart from the image), so a report's baseline may use another image. A
// point that has perf but no point row counts as completed and is keyed by
// its identity.
func FromResults(sweepID string, pts []results.Point, perf []results.PerfResult, evals []results.EvalResult) []Point {
	type acc struct {
		p     Point
		order int
	}
	byID := map[string]*acc{}
	var order []string
	get := func(pointID, configKey string, conc int) *acc {
		if a, ok := byID[pointID]; ok {
			if a.p.ConfigKey == "" {
				a.p.ConfigKey = configKey
			}
			if a.p.Conc == 0 {
				a.p.Conc = conc
			}
			return a
		}
		a := &acc{p: Point{SweepID: sweepID, PointID: pointID, ConfigKey: configKey, Conc: conc, OK: true, Status: "completed"}, order: len(order)}
		byID[pointID] = a
		order = append(order, pointID)
		return a
	}
	for _, p := range pts {
		a := get(p.PointID, p.ConfigKey, p.Conc)
		a.p.Status, a.p.OK = p.Status, okStatus(p.Status)
		a.p.Key = p.BaselineKey
	}
	for _, r := range perf {
		a := get(r.PointID, r.ConfigKey, r.Conc)
		perf := r.PerfSummary
		a.p.Perf = &perf
		a.p.ProfileHash = r.ProfileHash
		if a.p.Key == "" {
			a.p.Key = "identity:" + r.Identity
		}
	}
	for _, r := range evals {
		a := get(r.PointID, "", 0)
		a.p.Eval = &Eval{Score: r.EMStrict, Floor: r.Floor, Passed: r.Passed}
	}
	out := make([]Point, 0, len(order))
	for _, id := range order {
		p := byID[id].p
		if p.Key == "" {
			p.Key = "point:" + p.PointID
		}
		out = append(out, p)
	}
	return out
}

// CompareRuns is Compare plus the checks that need the whole baseline run:
// baseline points missing from the current run, and passing evals that
// dropped more than evalDropPts percentage points (negative: off).
func CompareRuns(current, baseline []Point, th Thresholds, evalDropPts float64) []Finding {
	out := Compare(current, baseline, th)
	base := map[string]Point{}
	for _, b := range baseline {
		base[b.Key] = b
	}
	cur := map[string]bool{}
	for _, c := range current {
		cur[c.Key] = true
		b, ok := base[c.Key]
		if !ok || !c.OK || c.Eval == nil || b.Eval == nil || !c.Eval.Passed || evalDropPts < 0 {
			continue
		}
		drop := (b.Eval.Score - c.Eval.Score) * 100
		if drop > evalDropPts {
			out = append(out, Finding{Kind: KindEvalDrop, PointID: c.PointID, ConfigKey: c.ConfigKey, Conc: c.Conc, BaselineSweep: b.SweepID,
				Baseline: b.Eval.Score, Current: c.Eval.Score, ChangePct: round(pctChange(b.Eval.Score, c.Eval.Score)), ThresholdPct: evalDropPts,
				Message: fmt.Sprintf("%s eval %.4f -> %.4f (%.1f points down, threshold %.1f) vs %s", c.PointID, b.Eval.Score, c.Eval.Score, drop, evalDropPts, b.SweepID)})
		}
	}
	var missing []Finding
	for _, b := range baseline {
		if cur[b.Key] || !b.OK {
			continue
		}
		missing = append(missing, Finding{Kind: KindMissing, PointID: b.PointID, ConfigKey: b.ConfigKey, Conc: b.Conc, BaselineSweep: b.SweepID,
			Message: fmt.Sprintf("%s has a result in %s but none in this run", b.PointID, b.SweepID)})
	}
	sort.SliceStable(missing, func(i, j int) bool { return missing[i].PointID < missing[j].PointID })
	return append(out, missing...)
}

// Row pairs a current point with its baseline for a side-by-side table.
type Row struct {
	Key      string
	Current  *Point // nil: missing from the current run
	Baseline *Point // nil: new point
	Findings []Finding
}

// Rows lines current and baseline points up by key (current order, then
// baseline-only points) and attaches each point's findings.
func Rows(current, baseline []Point, findings []Finding) []Row {
	byPoint := map[string][]Finding{}
	for _, f := range findings {
		byPoint[f.PointID] = append(byPoint[f.PointID], f)
	}
	base := map[string]*Point{}
	for i := range baseline {
		base[baseline[i].Key] = &baseline[i]
	}
	seen := map[string]bool{}
	var out []Row
	for i := range current {
		c := &current[i]
		seen[c.Key] = true
		out = append(out, Row{Key: c.Key, Current: c, Baseline: base[c.Key], Findings: byPoint[c.PointID]})
	}
	for i := range baseline {
		b := &baseline[i]
		if !seen[b.Key] {
			out = append(out, Row{Key: b.Key, Baseline: b, Findings: byPoint[b.PointID]})
		}
	}
	return out
}

// Delta is the signed change from base to cur in percent; ok is false when
// the base is not a positive number.
func Delta(base, cur float64) (pct float64, ok bool) {
	if !(base > 0) || math.IsNaN(cur) || math.IsInf(cur, 0) {
		return 0, false
	}
	return pctChange(base, cur), true
}

func pctChange(base, cur float64) float64 {
	if base == 0 {
		return 0
	}
	return (cur - base) / base * 100
}
