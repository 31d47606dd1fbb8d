// Package report renders one sweep as a single self-contained HTML page:
// the sweep summary, a table per point (stage timings and key figures), the
// regression table against a baseline sweep, the chart InferenceX users
// know (output throughput per GPU against interactivity: each config key's
// Pareto frontier as its curve, the frontier across keys, baseline dashed),
// the same against median E2EL, and the latency coverage gaps, as inline SVG. The page loads nothing from
// the network: CSS is inline and there is no script.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/sweepflow/sweepflow/accounting"
	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// Run is one sweep's rows from the results store.
type Run struct {
	Sweep   results.Sweep
	Found   bool // the sweeps table has the sweep row
	Points  []results.Point
	Perf    []results.PerfResult
	Evals   []results.EvalResult
	Stages  []results.StageRun
	Outputs []results.StageOutput
	// CheckFailures are the findings of a nightly whose configs failed
	// the check (its stored report): the night ran no point.
	CheckFailures []string
	// Canaries are a canary sweep's groups as its ledger row records them
	// (verdicts, reasons, the points a failed canary kept from starting
	// and their node-hours).
	Canaries []point.Canary
	// Failures are the sweep's failed stage attempts with class and
	// evidence (ledger table stage_failures).
	Failures []results.StageAttempt
	// Adaptive are the sweep's adaptive searches as its ledger row records
	// them; Added the point IDs they added, with what added each.
	Adaptive []adaptive.Key
	Added    map[string]*point.Added
}

// Simulated is true when any figure of the run came from the simulator.
func (r *Run) Simulated() bool {
	for _, p := range r.Perf {
		if p.Simulated {
			return true
		}
	}
	for _, e := range r.Evals {
		if e.Simulated {
			return true
		}
	}
	for _, o := range r.Outputs {
		if o.Simulated {
			return true
		}
	}
	return false
}

// Input is everything the page shows.
type Input struct {
	Current  *Run
	Baseline *Run // nil: no regression table, no dashed curves
	// Thresholds and EvalDropPts drive the regression table.
	Thresholds  regress.Thresholds
	EvalDropPts float64
	// CoverageFactor is the widest step allowed between neighbouring
	// concurrencies before a coverage gap is shown (0: 2).
	CoverageFactor float64
	Generated      time.Time
	// Forecast is what the sweep's forecast says it takes, from its stored
	// plan (nil: no forecast); ForecastNote says what it assumed, or why
	// there is none.
	Forecast     *forecast.Cluster
	ForecastNote string
	// NodeHours is where the current sweep's node-hours went (package
	// accounting); nil: the section is left out.
	NodeHours *accounting.Summary
}

// ErrNoSweep is returned when the store has nothing for a sweep ID.
var ErrNoSweep = fmt.Errorf("report: sweep not found")

// LoadRun reads one sweep from the store.
func LoadRun(ctx context.Context, s *results.Store, sweepID string) (*Run, error) {
	r := &Run{}
	var err error
	if r.Sweep, r.Found, err = s.GetSweep(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Points, err = s.Points(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Perf, err = s.Perf(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Evals, err = s.Evals(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Stages, err = s.StageRuns(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Outputs, err = s.StageOutputs(ctx, sweepID); err != nil {
		return nil, err
	}
	if r.Failures, err = s.FailedAttempts(ctx, sweepID); err != nil {
		return nil, err
	}
	rep, ok, err := s.GetRegressionReport(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	if ok && len(rep.JSON) > 0 {
		var stored struct {
			CheckFailures []string `json:"check_failures"`
		}
		if err := json.Unmarshal(rep.JSON, &stored); err != nil {
			return nil, fmt.Errorf("report: regression report of %s: %w", sweepID, err)
		}
		r.CheckFailures = stored.CheckFailures
	}
	if r.Found && r.Sweep.ConfigJSON != "" {
		var rec struct {
			Canaries []point.Canary `json:"canaries"`
			Adaptive []adaptive.Key `json:"adaptive"`
		}
		if err := json.Unmarshal([]byte(r.Sweep.ConfigJSON), &rec); err != nil {
			return nil, fmt.Errorf("report: sweep row of %s: %w", sweepID, err)
		}
		r.Canaries, r.Adaptive = rec.Canaries, rec.Adaptive
	}
	r.Added = map[string]*point.Added{}
	for _, p := range r.Points {
		var s point.Spec
		if len(p.SpecJSON) > 0 && json.Unmarshal(p.SpecJSON, &s) == nil && s.Added != nil {
			r.Added[p.PointID] = s.Added
		}
	}
	if !r.Found && len(r.Points) == 0 && len(r.Perf) == 0 && len(r.Evals) == 0 {
		return nil, fmt.Errorf("%w: %q has no rows in the results store", ErrNoSweep, sweepID)
	}
	if !r.Found {
		r.Sweep.ID = sweepID
	}
	return r, nil
}

// Load reads the current sweep and, when baselineID is not empty, the
// baseline sweep.
func Load(ctx context.Context, s *results.Store, sweepID, baselineID string) (*Input, error) {
	in := &Input{Thresholds: regress.DefaultThresholds(), EvalDropPts: regress.DefaultEvalDropPts, Generated: time.Now()}
	var err error
	if in.Current, err = LoadRun(ctx, s, sweepID); err != nil {
		return nil, err
	}
	if baselineID != "" {
		if in.Baseline, err = LoadRun(ctx, s, baselineID); err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
	}
	ps, sweeps, err := accounting.Load(ctx, s, accounting.Filter{Sweep: sweepID})
	if err != nil {
		return nil, fmt.Errorf("report: node-hours of %s: %w", sweepID, err)
	}
	sum := accounting.Summarize(accounting.Book(ps, in.Generated), sweeps)
	in.NodeHours = &sum
	return in, nil
}

// xInteractivity and xE2EL pick a chart's x from a perf row.
func xInteractivity(p results.PerfResult) float64 { return p.Interactivity }
func xE2EL(p results.PerfResult) float64          { return p.E2ELMedianMs / 1000 }

// chartSeries turns perf rows into one curve per config key.
func chartSeries(r *Run, baseline bool, x func(results.PerfResult) float64) []Series {
	return chartSeriesY(r, baseline, x, func(p results.PerfResult) float64 { return p.OutputTputPerGPU })
}

// chartSeriesY is chartSeries with y picked by y.
func chartSeriesY(r *Run, baseline bool, x, y func(results.PerfResult) float64) []Series {
	by := map[string]*Series{}
	var keys []string
	for _, p := range r.Perf {
		k := keyOf(p)
		s, ok := by[k]
		if !ok {
			s = &Series{Label: k, Baseline: baseline}
			by[k] = s
			keys = append(keys, k)
		}
		xy := XY{X: x(p), Y: y(p), Conc: p.Conc, Label: k}
		if a := r.Added[p.PointID]; a != nil {
			xy.Added = a.Mode
		}
		s.Points = append(s.Points, xy)
	}
	sort.Strings(keys)
	out := make([]Series, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	return out
}

func keyOf(p results.PerfResult) string {
	if p.ConfigKey == "" {
		return "(no config key)"
	}
	return p.ConfigKey
}

// Series returns the interactivity chart's curves: the current run's, then
// the baseline's.
func (in *Input) Series() []Series { return in.series(xInteractivity) }

// E2ELSeries returns the E2EL chart's curves.
func (in *Input) E2ELSeries() []Series { return in.series(xE2EL) }

func (in *Input) series(x func(results.PerfResult) float64) []Series {
	s := chartSeries(in.Current, false, x)
	if in.Baseline != nil {
		s = append(s, chartSeries(in.Baseline, true, x)...)
	}
	return s
}

// EnergySeries returns the energy chart's curves: joules per output token
// against interactivity, of the points whose power the gate passed.
func (in *Input) EnergySeries() []Series {
	all := chartSeriesY(in.Current, false, xInteractivity, joulesPerOutputToken)
	if in.Baseline != nil {
		all = append(all, chartSeriesY(in.Baseline, true, xInteractivity, joulesPerOutputToken)...)
	}
	// Points without valid power figures are not on this chart.
	var out []Series
	for _, s := range all {
		pts := s.Points[:0:0]
		for _, p := range s.Points {
			if p.Y > 0 {
				pts = append(pts, p)
			}
		}
		if len(pts) > 0 {
			s.Points = pts
			out = append(out, s)
		}
	}
	return out
}

func joulesPerOutputToken(p results.PerfResult) float64 {
	if p.Power == nil || !p.Power.Valid {
		return 0
	}
	return p.Power.JoulesPerOutputToken
}

// Coverage finds the current run's gaps along median E2EL and interactivity
// (see package coverage), with CoverageFactor (default 2).
func (in *Input) Coverage() curvegaps.Result {
	var col curvegaps.Collector
	for _, p := range in.Current.Perf {
		col.Add(keyOf(p), curvegaps.Point{Conc: p.Conc, E2ELSeconds: p.E2ELMedianMs / 1000, Interactivity: p.Interactivity})
	}
	res, err := curvegaps.Find(col.Curves(), in.factor())
	if err != nil { // factor checked by factor(); keep the page renderable
		return curvegaps.Result{Gaps: []curvegaps.Gap{}}
	}
	return res
}

func (in *Input) factor() float64 {
	if in.CoverageFactor > 1 {
		return in.CoverageFactor
	}
	return curvegaps.DefaultFactor
}

// Findings compares the current run with the baseline (nil without one).
func (in *Input) Findings() ([]regress.Row, []regress.Finding) {
	if in.Baseline == nil {
		return nil, nil
	}
	cur := regress.FromResults(in.Current.Sweep.ID, in.Current.Points, in.Current.Perf, in.Current.Evals)
	base := regress.FromResults(in.Baseline.Sweep.ID, in.Baseline.Points, in.Baseline.Perf, in.Baseline.Evals)
	fs := regress.CompareRuns(cur, base, in.Thresholds, in.EvalDropPts)
	return regress.Rows(cur, base, fs), fs
}
