package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// pointView is one point's section.
type pointView struct {
	ID, ConfigKey, Topology, Status, FailedStage, Error, Identity string
	Conc                                                          int
	Perf                                                          *results.PerfResult
	Eval                                                          *results.EvalResult
	Stages                                                        []stageView
	StagesNote                                                    string
	Total                                                         string
	Simulated                                                     bool
	// EvalOnly: the point ran its eval without the throughput benchmark
	// (an evals-only or all-evals changelog entry).
	EvalOnly bool
	// Added: an adaptive search added the point; Served the gap or SLO.
	Added  *point.Added
	Served string
}

type stageView struct {
	Stage, Outcome, Start, Duration, Error string
	Rounds                                 int
	BarLeft, BarWidth                      float64 // percent of the point's span
}

type regressionView struct {
	PointID, ConfigKey string
	Conc               int
	Tput, TTFT, Intvty cmpCell
	Eval               cmpCell
	Findings           []findingView
	Status             string
}

type cmpCell struct {
	Base, Cur, Delta string
	Class            string // "worse", "better" or ""
}

type findingView struct{ Category, Message string }

type summaryRow struct{ Name, Value string }

// gapView is one row of the coverage table.
type gapView struct {
	ConfigKey, Metric, From, To, Ratio, Add string
}

type page struct {
	Title     string
	SweepID   string
	Simulated bool
	Summary   []summaryRow
	Chart     template.HTML
	E2ELChart template.HTML // empty when no point recorded a median E2EL
	// EnergyChart is joules per output token vs interactivity, the second
	// frontier; empty when no point has valid power figures.
	EnergyChart template.HTML
	Gaps        []gapView
	Factor      string
	HasBaseline bool
	BaselineID  string
	Thresholds  regress.Thresholds
	EvalDropPts float64
	Regressions []regressionView
	Counts      []summaryRow
	Points      []pointView
	Generated   string
	// CheckFailures: the nightly's check failed and no point ran.
	CheckFailures []string
	// Canaries: a canary sweep's groups.
	Canaries []canaryView
	// FailureClasses ranks the failure classes by attempts; Failures is
	// every failed attempt with its evidence.
	FailureClasses []summaryRow
	Failures       []failureView
	// Forecast is the forecast against what the sweep took;
	// ForecastNote what it assumed or why there is none.
	Forecast     []forecastView
	ForecastNote string
	// NodeHours is where the allocations' node-hours went (nil: none).
	NodeHours *nodeHoursView
	// Adaptive are the sweep's adaptive searches.
	Adaptive []adaptiveView
}

// failureView is one failed stage attempt.
type failureView struct {
	PointID, Stage, Attempt, Class, Excerpt, Error, Heartbeat, Worker, At string
}

// failureViews ranks the classes (most attempts first, then by name) and
// lists the attempts in ledger order. Attempt, error, heartbeat and worker
// are "-" where the ledger predates the attempt ledger.
func failureViews(fs []results.StageAttempt) ([]summaryRow, []failureView) {
	counts := map[string]int{}
	var views []failureView
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, f := range fs {
		counts[string(f.Class)]++
		at := "-"
		if !f.EndedAt.IsZero() {
			at = f.EndedAt.UTC().Format(time.RFC3339)
		}
		v := failureView{PointID: f.PointID, Stage: f.Stage, Attempt: "-", Class: string(f.Class), Excerpt: f.Excerpt,
			Error: dash(f.ErrorType), Heartbeat: dash(f.Heartbeat), Worker: dash(f.Worker), At: at}
		if f.Attempt > 0 {
			v.Attempt = fmt.Sprint(f.Attempt)
		}
		if f.ErrorType != "" && f.Message != "" && f.Message != f.Excerpt {
			v.Error = f.ErrorType + ": " + f.Message
		}
		views = append(views, v)
	}
	classes := make([]string, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool {
		if counts[classes[i]] != counts[classes[j]] {
			return counts[classes[i]] > counts[classes[j]]
		}
		return classes[i] < classes[j]
	})
	var rows []summaryRow
	for _, c := range classes {
		rows = append(rows, summaryRow{c, fmt.Sprint(counts[c])})
	}
	return rows, views
}

// canaryView is one canary group's row.
type canaryView struct {
	Image, Backend, PointID, NodeHours, Verdict, Reason, SavedNodeHours string
	Points, NotStarted                                                  int
}

type forecastView struct{ What, Forecast, Actual, Ratio string }

// forecastViews formats the forecast table: actual / forecast as the ratio.
func forecastViews(rows []ForecastRow) []forecastView {
	var out []forecastView
	for _, r := range rows {
		v := forecastView{What: r.What, Forecast: fmt.Sprintf("%.1f", r.Forecast), Actual: "-", Ratio: "-"}
		if r.Actual >= 0 {
			v.Actual = fmt.Sprintf("%.1f", r.Actual)
			if r.Forecast > 0 {
				v.Ratio = fmt.Sprintf("%.2f", r.Actual/r.Forecast)
			}
		}
		out = append(out, v)
	}
	return out
}

// Render writes the page.
func Render(w io.Writer, in *Input) error {
	p := build(in)
	return pageTmpl.Execute(w, p)
}

func build(in *Input) page {
	cur := in.Current
	sim := cur.Simulated() || (in.Baseline != nil && in.Baseline.Simulated())
	p := page{
		Title:     "sweepflow report: " + cur.Sweep.ID,
		SweepID:   cur.Sweep.ID,
		Simulated: sim,
		Generated: in.Generated.UTC().Format(time.RFC3339),
	}
	p.Summary = summary(cur)
	p.Forecast, p.ForecastNote = forecastViews(in.ForecastCheck()), in.ForecastNote
	if p.Forecast != nil && p.ForecastNote == "" {
		p.ForecastNote = forecastNote
	}
	if len(cur.CheckFailures) > 0 {
		p.CheckFailures = cur.CheckFailures
		p.Summary = append(p.Summary, summaryRow{"Nightly check", fmt.Sprintf("failed with %d findings; no point ran", len(cur.CheckFailures))})
	}
	if len(cur.Canaries) > 0 {
		p.Summary = append(p.Summary, summaryRow{"Canaries", point.CanarySummary(cur.Canaries)})
		for _, c := range cur.Canaries {
			p.Canaries = append(p.Canaries, canaryView{Image: c.Image, Backend: c.Backend, PointID: c.PointID,
				NodeHours: point.FormatNodeHours(c.NodeHours), Verdict: c.Verdict, Reason: c.Reason,
				SavedNodeHours: point.FormatNodeHours(c.SavedNodeHours), Points: c.Points, NotStarted: c.NotStarted})
		}
	}
	if len(cur.Failures) > 0 {
		p.FailureClasses, p.Failures = failureViews(cur.Failures)
		var parts []string
		for _, r := range p.FailureClasses {
			parts = append(parts, r.Name+" "+r.Value)
		}
		p.Summary = append(p.Summary, summaryRow{"Failed attempts", fmt.Sprintf("%d (%s)", len(cur.Failures), strings.Join(parts, ", "))})
	}
	cov := in.Coverage()
	p.Factor = strconv.FormatFloat(in.factor(), 'g', -1, 64)
	p.Gaps = gapViews(cov)
	p.Summary = append(p.Summary, summaryRow{"Coverage gaps", fmt.Sprintf("%d wider than x%s between neighbouring concurrencies", len(cov.Gaps), p.Factor)})
	p.Chart = template.HTML(Chart(in.Series(), ChartOptions{Title: "Output throughput per GPU vs interactivity", Simulated: sim,
		FrontierAll: true, Bands: gapBands(cov, curvegaps.MetricIntvty)}))
	if hasE2EL(in) {
		p.E2ELChart = template.HTML(Chart(in.E2ELSeries(), ChartOptions{ID: "e2el", Title: "Output throughput per GPU vs median E2EL", Simulated: sim,
			XLabel: "Median end-to-end latency (s)", XUnit: "s", XLowerBetter: true, XLogAbove: 10, FrontierAll: true, Bands: gapBands(cov, curvegaps.MetricE2EL)}))
	}
	if es := in.EnergySeries(); len(es) > 0 {
		p.EnergyChart = template.HTML(Chart(es, ChartOptions{ID: "energy", Title: "Energy per output token vs interactivity", Simulated: sim,
			YLabel: "GPU energy per output token (J/token)", YUnit: "J/token", YLowerBetter: true, FrontierAll: true}))
	}
	if in.Baseline != nil {
		p.HasBaseline, p.BaselineID = true, in.Baseline.Sweep.ID
		p.Thresholds, p.EvalDropPts = in.Thresholds, in.EvalDropPts
		rows, fs := in.Findings()
		p.Regressions = regressionRows(rows)
		counts := map[string]int{}
		for _, f := range fs {
			counts[regress.Category(f.Kind)]++
		}
		for _, c := range []string{regress.CategorySlower, regress.CategoryMoreEnergy, regress.CategoryLessAccurate, regress.CategoryEvalBelowFloor, regress.CategoryNewlyFailing, regress.CategoryMissing} {
			p.Counts = append(p.Counts, summaryRow{c, fmt.Sprint(counts[c])})
		}
		p.Summary = append(p.Summary, summaryRow{"Baseline", in.Baseline.Sweep.ID}, summaryRow{"Regression findings", fmt.Sprint(len(fs))})
	}
	p.Points = points(cur)
	p.NodeHours = buildNodeHours(in.NodeHours)
	p.Adaptive = adaptiveViews(cur.Adaptive, sim)
	if n := len(cur.Added); n > 0 {
		p.Summary = append(p.Summary, summaryRow{"Adaptive points", fmt.Sprintf("%d added on deployments whose server was up (marked +c in the charts)", n)})
	}
	return p
}

func hasE2EL(in *Input) bool {
	for _, r := range []*Run{in.Current, in.Baseline} {
		if r == nil {
			continue
		}
		for _, p := range r.Perf {
			if p.E2ELMedianMs > 0 {
				return true
			}
		}
	}
	return false
}

// gapBands shades one metric's gaps on its chart, with each suggested
// concurrency where the log-log interpolation puts it.
func gapBands(cov curvegaps.Result, metric string) []Band {
	var out []Band
	for _, g := range cov.Gaps {
		if g.Metric != metric {
			continue
		}
		b := Band{Label: g.ConfigKey, From: g.From.Value, To: g.To.Value, Text: fmt.Sprintf("gap x%.1f: %s", g.Ratio(), addText(g.SuggestConc))}
		for _, c := range g.SuggestConc {
			b.Suggest = append(b.Suggest, Mark{X: curvegaps.Predict(g.From, g.To, c), Conc: c})
		}
		out = append(out, b)
	}
	return out
}

func addText(cs []int) string {
	if len(cs) == 0 {
		return "no concurrency in between"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("c%d", c)
	}
	return "add " + strings.Join(parts, " ")
}

func gapViews(cov curvegaps.Result) []gapView {
	var out []gapView
	for _, g := range cov.Gaps {
		val := func(v float64) string { return fmt.Sprintf("%.1f tok/s/user", v) }
		name := "median interactivity"
		if g.Metric == curvegaps.MetricE2EL {
			val = func(v float64) string { return fmt.Sprintf("%.3g s", v) }
			name = "median E2EL"
		}
		out = append(out, gapView{ConfigKey: g.ConfigKey, Metric: name,
			From: fmt.Sprintf("c%d: %s", g.From.Conc, val(g.From.Value)), To: fmt.Sprintf("c%d: %s", g.To.Conc, val(g.To.Value)),
			Ratio: fmt.Sprintf("x%.1f", g.Ratio()), Add: addText(g.SuggestConc)})
	}
	return out
}

func summary(r *Run) []summaryRow {
	s := r.Sweep
	rows := []summaryRow{{"Sweep", s.ID}}
	if s.Name != "" {
		rows = append(rows, summaryRow{"Name", s.Name})
	}
	if s.Status != "" {
		rows = append(rows, summaryRow{"Status", s.Status})
	}
	if !s.StartedAt.IsZero() {
		rows = append(rows, summaryRow{"Started", s.StartedAt.UTC().Format("2006-01-02 15:04:05 MST")})
	}
	if !s.FinishedAt.IsZero() {
		rows = append(rows, summaryRow{"Finished", s.FinishedAt.UTC().Format("2006-01-02 15:04:05 MST")})
		if !s.StartedAt.IsZero() {
			rows = append(rows, summaryRow{"Wall time", dur(s.FinishedAt.Sub(s.StartedAt))})
		}
	}
	if s.Nightly {
		rows = append(rows, summaryRow{"Nightly", "yes"})
	}
	if s.ReuseFrom != "" {
		rows = append(rows, summaryRow{"Reuses outputs of", s.ReuseFrom})
	}
	byStatus := map[string]int{}
	for _, p := range r.Points {
		byStatus[orDash(p.Status)]++
	}
	var parts []string
	for _, k := range sortedKeys(byStatus) {
		parts = append(parts, fmt.Sprintf("%d %s", byStatus[k], k))
	}
	rows = append(rows, summaryRow{"Points", fmt.Sprintf("%d (%s)", len(r.Points), strings.Join(parts, ", "))})
	passed := 0
	for _, e := range r.Evals {
		if e.Passed {
			passed++
		}
	}
	rows = append(rows, summaryRow{"Perf results", fmt.Sprint(len(r.Perf))},
		summaryRow{"GSM8K evals passed", fmt.Sprintf("%d of %d", passed, len(r.Evals))})
	if r.Simulated() {
		rows = append(rows, summaryRow{"Data", "SIMULATED (figures come from the simulator, not from GPUs)"})
	}
	return rows
}

// specEvalOnly reads profile.eval_only from a point's stored spec.
func specEvalOnly(spec []byte) bool {
	var s point.Spec
	return len(spec) > 0 && json.Unmarshal(spec, &s) == nil && s.Profile.EvalOnly
}

func points(r *Run) []pointView {
	perf := map[string]*results.PerfResult{}
	for i := range r.Perf {
		perf[r.Perf[i].PointID] = &r.Perf[i]
	}
	evals := map[string]*results.EvalResult{}
	for i := range r.Evals {
		evals[r.Evals[i].PointID] = &r.Evals[i]
	}
	stages := map[string][]results.StageRun{}
	for _, s := range r.Stages {
		stages[s.PointID] = append(stages[s.PointID], s)
	}
	outputs := map[string][]results.StageOutput{}
	for _, o := range r.Outputs {
		outputs[o.PointID] = append(outputs[o.PointID], o)
	}
	seen := map[string]bool{}
	var views []pointView
	add := func(v pointView) {
		v.Perf, v.Eval = perf[v.ID], evals[v.ID]
		v.Simulated = (v.Perf != nil && v.Perf.Simulated) || (v.Eval != nil && v.Eval.Simulated)
		v.Stages, v.Total, v.StagesNote = stageViews(stages[v.ID], outputs[v.ID], r.Sweep.StartedAt)
		views = append(views, v)
		seen[v.ID] = true
	}
	for _, p := range r.Points {
		a := r.Added[p.PointID]
		add(pointView{ID: p.PointID, ConfigKey: p.ConfigKey, Topology: p.Topology, Status: p.Status, FailedStage: p.FailedStage,
			Error: p.Error, Identity: short(p.Identity), Conc: p.Conc, EvalOnly: specEvalOnly(p.SpecJSON), Added: a, Served: addedText(a)})
	}
	for _, p := range r.Perf { // perf without a point row (older ledgers)
		if !seen[p.PointID] {
			add(pointView{ID: p.PointID, ConfigKey: p.ConfigKey, Identity: short(p.Identity), Conc: p.Conc})
		}
	}
	sort.SliceStable(views, func(i, j int) bool {
		if views[i].ConfigKey != views[j].ConfigKey {
			return views[i].ConfigKey < views[j].ConfigKey
		}
		return views[i].Conc < views[j].Conc
	})
	return views
}

// stageViews lays out a point's stage timings: from the stage runs the
// workflow recorded, else (older ledgers) from when each durable stage
// output was written.
func stageViews(runs []results.StageRun, outs []results.StageOutput, sweepStart time.Time) ([]stageView, string, string) {
	if len(runs) == 0 {
		if len(outs) == 0 {
			return nil, "", "No stage timings recorded for this point."
		}
		var v []stageView
		for _, o := range outs {
			at := "-"
			if !sweepStart.IsZero() {
				at = "+" + dur(o.CreatedAt.Sub(sweepStart))
			}
			v = append(v, stageView{Stage: o.Stage, Outcome: "output recorded", Start: at, Duration: "-", Rounds: o.Attempt})
		}
		return v, "", "Stage runs were not recorded for this point; the times are when each durable output was written, from the sweep start."
	}
	start, end := runs[0].StartedAt, runs[0].EndedAt
	for _, r := range runs {
		if !r.StartedAt.IsZero() && (start.IsZero() || r.StartedAt.Before(start)) {
			start = r.StartedAt
		}
		if r.EndedAt.After(end) {
			end = r.EndedAt
		}
	}
	span := end.Sub(start)
	var v []stageView
	for _, r := range runs {
		sv := stageView{Stage: r.Stage, Outcome: orDash(string(r.Outcome)), Start: "-", Duration: "-", Rounds: r.Rounds, Error: r.Error}
		if !r.StartedAt.IsZero() && !start.IsZero() {
			sv.Start = "+" + dur(r.StartedAt.Sub(start))
		}
		if d := r.Duration(); d > 0 {
			sv.Duration = dur(d)
		}
		if span > 0 && !r.StartedAt.IsZero() {
			sv.BarLeft = 100 * float64(r.StartedAt.Sub(start)) / float64(span)
			sv.BarWidth = math.Max(0.5, 100*float64(r.Duration())/float64(span))
		}
		v = append(v, sv)
	}
	total := ""
	if span > 0 {
		total = dur(span)
	}
	return v, total, ""
}

func regressionRows(rows []regress.Row) []regressionView {
	var out []regressionView
	for _, r := range rows {
		v := regressionView{}
		var b, c *regress.Point = r.Baseline, r.Current
		ref := c
		if ref == nil {
			ref = b
		}
		v.PointID, v.ConfigKey, v.Conc = ref.PointID, ref.ConfigKey, ref.Conc
		switch {
		case c == nil:
			v.Status = "missing"
		case b == nil:
			v.Status = "new (no baseline)"
		default:
			v.Status = c.Status
		}
		var bp, cp *regress.Perf
		if b != nil {
			bp = b.Perf
		}
		if b != nil && c != nil {
			if why := regress.Incomparable(*c, *b); why != "" {
				// No delta against figures measured otherwise.
				v.Status, bp = c.Status+" (no comparable baseline: "+why+")", nil
			}
		}
		if c != nil {
			cp = c.Perf
		}
		get := func(p *regress.Perf, f func(*regress.Perf) float64) (float64, bool) {
			if p == nil {
				return 0, false
			}
			return f(p), true
		}
		v.Tput = cell(get(bp, func(p *regress.Perf) float64 { return p.OutputTputPerGPU }))(get(cp, func(p *regress.Perf) float64 { return p.OutputTputPerGPU }))(true, 1)
		v.TTFT = cell(get(bp, func(p *regress.Perf) float64 { return p.TTFTp90Ms }))(get(cp, func(p *regress.Perf) float64 { return p.TTFTp90Ms }))(false, 1)
		v.Intvty = cell(get(bp, func(p *regress.Perf) float64 { return p.Interactivity }))(get(cp, func(p *regress.Perf) float64 { return p.Interactivity }))(true, 1)
		var be, ce *regress.Eval
		if b != nil {
			be = b.Eval
		}
		if c != nil {
			ce = c.Eval
		}
		v.Eval = cmpCell{Base: "-", Cur: "-", Delta: ""}
		if be != nil {
			v.Eval.Base = fmt.Sprintf("%.4f", be.Score)
		}
		if ce != nil {
			v.Eval.Cur = fmt.Sprintf("%.4f", ce.Score)
			if !ce.Passed {
				v.Eval.Class = "worse"
				v.Eval.Delta = fmt.Sprintf("below floor %.2f", ce.Floor)
			}
		}
		if be != nil && ce != nil && v.Eval.Delta == "" {
			d := (ce.Score - be.Score) * 100
			v.Eval.Delta = fmt.Sprintf("%+.1f pts", d)
		}
		for _, f := range r.Findings {
			v.Findings = append(v.Findings, findingView{Category: regress.Category(f.Kind), Message: f.Message})
			switch f.Kind {
			case regress.KindOutputTput:
				v.Tput.Class = "worse"
			case regress.KindTTFT:
				v.TTFT.Class = "worse"
			case regress.KindInteractivity:
				v.Intvty.Class = "worse"
			case regress.KindEvalDrop, regress.KindEvalBelowFloor:
				v.Eval.Class = "worse"
			}
		}
		out = append(out, v)
	}
	return out
}

// cell formats base -> current with the signed change; improvements beyond
// 1 % are marked better (findings mark worse).
func cell(base float64, hasBase bool) func(float64, bool) func(bool, int) cmpCell {
	return func(cur float64, hasCur bool) func(bool, int) cmpCell {
		return func(higherGood bool, prec int) cmpCell {
			c := cmpCell{Base: "-", Cur: "-"}
			if hasBase {
				c.Base = num(base, prec)
			}
			if hasCur {
				c.Cur = num(cur, prec)
			}
			if hasBase && hasCur {
				if d, ok := regress.Delta(base, cur); ok {
					c.Delta = fmt.Sprintf("%+.1f %%", d)
					if (higherGood && d > 1) || (!higherGood && d < -1) {
						c.Class = "better"
					}
				}
			}
			return c
		}
	}
}

func num(v float64, prec int) string {
	if v == 0 {
		return "0"
	}
	s := fmt.Sprintf("%.*f", prec, v)
	// Thousands separators for readability.
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String() + frac
	if neg {
		out = "-" + out
	}
	return out
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"num":   num,
	"short": short,
	"pct":   func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f4":    func(v float64) string { return fmt.Sprintf("%.4f", v) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"pass": func(b bool) string {
		if b {
			return "pass"
		}
		return "FAIL"
	},
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px 32px; color: #1b1b1b; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 10px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; font-family: ui-monospace, Menlo, Consolas, monospace; }
.banner { background: #fff4d6; border: 1px solid #e0b100; padding: 8px 12px; margin: 10px 0; font-weight: bold; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 10px; }
th, td { border: 1px solid #d8d8d8; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f5f7; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.worse { background: #fde2e1; color: #8a1111; font-weight: bold; }
.better { background: #e3f5e6; color: #125c25; }
.muted { color: #666; font-size: 12px; }
.kv th { width: 180px; }
.point { border: 1px solid #e2e2e2; border-radius: 4px; padding: 6px 14px 10px; margin: 12px 0; }
.bar { position: relative; width: 320px; height: 12px; background: #f1f1f1; }
.bar span { position: absolute; top: 0; height: 12px; background: #8a96a8; }
.status-completed { color: #125c25; font-weight: bold; }
.status-failed, .status-eval-failed, .status-aborted { color: #8a1111; font-weight: bold; }
.status-incomplete { color: #8a5a00; font-weight: bold; }
.canary-failed { color: #8a1111; font-weight: bold; }
.canary-passed { color: #125c25; font-weight: bold; }
.chart { margin: 8px 0; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<div class="muted">generated {{.Generated}} by starter report</div>
{{if .Simulated}}<div class="banner" id="simulated-banner">SIMULATED DATA: these figures come from sweepflow's simulated engine, not from GPUs.</div>{{end}}

<h2>Sweep summary</h2>
<table class="kv" id="summary">
{{range .Summary}}<tr><th>{{.Name}}</th><td>{{.Value}}</td></tr>
{{end}}</table>

{{if or .Forecast .ForecastNote}}<h2>Forecast against actual</h2>
<div class="muted" id="forecast-note">{{.ForecastNote}}</div>
{{if .Forecast}}<table id="forecast">
<tr><th></th><th>forecast</th><th>actual</th><th>actual / forecast</th></tr>
{{range .Forecast}}<tr class="forecast-row"><th>{{.What}}</th><td class="n">{{.Forecast}}</td><td class="n">{{.Actual}}</td><td class="n">{{.Ratio}}</td></tr>
{{end}}</table>{{end}}
{{end}}{{if .CheckFailures}}<h2 id="check-failed">Nightly check failed</h2>
<p>The configs as the schedule read them tonight failed <code>starter check</code>; no point ran.</p>
<ul class="findings">{{range .CheckFailures}}<li><code>{{.}}</code></li>{{end}}</ul>
{{end}}{{if .Canaries}}<h2 id="canaries">Canaries</h2>
<div class="muted">Each image and backend's cheapest point (planned node-hours on an allocation of its own) ran first; its other points started only once it had figures. A failed canary's points were not started: the node-hours saved are their planned node-hours.</div>
<table id="canary-table">
<tr><th>image</th><th>backend</th><th>canary</th><th>node-hours</th><th>verdict</th><th>points</th><th>not started</th><th>node-hours saved</th></tr>
{{range .Canaries}}<tr class="canary-row"><td><code>{{.Image}}</code></td><td>{{.Backend}}</td><td>{{.PointID}}</td><td class="n">{{.NodeHours}}</td>
<td class="canary-{{.Verdict}}">{{.Verdict}}{{if .Reason}}<div class="muted">{{.Reason}}</div>{{end}}</td><td class="n">{{.Points}}</td><td class="n">{{.NotStarted}}</td><td class="n">{{.SavedNodeHours}}</td></tr>
{{end}}</table>
{{end}}{{if .Failures}}<h2 id="failures">Failed attempts</h2>
<div class="muted">Every stage attempt that failed, was lost with its worker or was cancelled, with its failure class and the evidence it was read from (the Slurm job state, the health phase reached, a line of the role's log, the validity gate, a heartbeat timeout), the error it ended with, its last heartbeat and the worker that ran it. Classes by attempts:</div>
<table id="failure-classes">
<tr><th>class</th><th>attempts</th></tr>
{{range .FailureClasses}}<tr class="failure-class-row"><td><code>{{.Name}}</code></td><td class="n">{{.Value}}</td></tr>
{{end}}</table>
<table id="failure-table">
<tr><th>point</th><th>stage</th><th>attempt</th><th>class</th><th>evidence</th><th>error</th><th>last heartbeat</th><th>worker</th><th>ended</th></tr>
{{range .Failures}}<tr class="failure-row"><td>{{.PointID}}</td><td>{{.Stage}}</td><td class="n">{{.Attempt}}</td><td><code>{{.Class}}</code></td><td><code>{{.Excerpt}}</code></td><td><code>{{.Error}}</code></td><td><code>{{.Heartbeat}}</code></td><td>{{.Worker}}</td><td>{{.At}}</td></tr>
{{end}}</table>
{{end}}{{with .NodeHours}}<h2 id="node-hours">Where the node-hours went</h2>
<div id="node-hours-headline">{{.Headline}}</div>
<div class="chart">{{.Chart}}</div>
<div class="muted">Every node-minute from an allocation's grant to its teardown, booked once (points of one deployment share their allocation and bring-up): green made figures, blue set up or tore down, amber waited for an operator on held nodes, red went to failed attempts. The same as <code>starter stats --sweep</code>; how minutes are split: docs/results.md.</div>
{{if .Classes}}<table id="node-hours-classes">
<tr><th>failure class</th><th>attempts</th><th>node-minutes lost</th></tr>
{{range .Classes}}<tr class="node-hours-class-row"><td><code>{{.Class}}</code></td><td class="n">{{.Attempts}}</td><td class="n">{{printf "%.1f" .NodeMinutes}}</td></tr>
{{end}}</table>{{end}}
{{if .Timings}}<table id="node-hours-timings">
<tr><th>cluster</th><th>config key</th><th>deployment</th><th>queue wait n</th><th>p50 s</th><th>p90 s</th><th>bring-up n</th><th>p50 s</th><th>p90 s</th></tr>
{{range .Timings}}<tr class="node-hours-timing-row"><td>{{or .Cluster "-"}}</td><td>{{or .ConfigKey "-"}}</td><td><code>{{short .Deployment}}</code></td><td class="n">{{.QueueN}}</td><td class="n">{{printf "%.1f" .QueueP50}}</td><td class="n">{{printf "%.1f" .QueueP90}}</td><td class="n">{{.BringUpN}}</td><td class="n">{{printf "%.1f" .BringUpP50}}</td><td class="n">{{printf "%.1f" .BringUpP90}}</td></tr>
{{end}}</table>{{end}}
{{range .Notes}}<div class="muted">note: {{.}}</div>{{end}}
{{end}}{{if .Adaptive}}<h2 id="adaptive">Adaptive points</h2>
<div class="muted">Points the sweep added while a deployment's server was up: fill splits the gaps <code>starter coverage</code> finds (same rule and factor), slo brackets and bisects for the largest concurrency that meets an SLO. None brought a server up.</div>
{{range .Adaptive}}<h3>{{.Request}}</h3>
<div class="adaptive-budget">{{.Budget}}</div>
<ul class="adaptive-deployments">{{range .Deps}}<li>{{.}}</li>{{end}}</ul>
{{if .Added}}<table class="adaptive-added">
<tr><th>#</th><th>point</th><th>conc</th><th>deployment</th><th>served</th><th>why</th></tr>
{{range .Added}}<tr class="added-row"><td class="n">{{.Seq}}</td><td>{{.PointID}}</td><td class="n">{{.Conc}}</td><td>{{.Topology}}</td><td>{{.Served}}</td><td class="muted">{{.Reason}}</td></tr>
{{end}}</table>{{end}}
{{range .Charts}}<div class="chart">{{.}}</div>{{end}}
{{end}}{{end}}<h2>Output throughput per GPU vs interactivity</h2>
<div class="chart">{{.Chart}}</div>
<div class="muted">Each point is a concurrency. Each config key's curve is its Pareto frontier (no other point of the key has both more throughput and more interactivity); small faded markers are dominated points. The wide grey band is the frontier across config keys. Shaded bands are interactivity coverage gaps.{{if .HasBaseline}} Dashed curves with hollow markers, and the dashed grey band: baseline {{.BaselineID}}.{{end}}</div>

<h2>Output throughput per GPU vs median E2EL</h2>
{{if .E2ELChart}}<div class="chart">{{.E2ELChart}}</div>
<div class="muted">The same points against median end-to-end latency; here the frontier is more throughput at lower latency. Shaded bands are E2EL coverage gaps, ▲ the concurrencies to add where the interpolation places them.</div>
{{else}}<div class="muted" id="no-e2el">No point recorded a median E2EL.</div>{{end}}

<h2>Energy per output token vs interactivity</h2>
{{if .EnergyChart}}<div class="chart">{{.EnergyChart}}</div>
<div class="muted">The same points, with the GPUs' energy over each perf window divided by its output tokens (InferenceX's joules_per_output_token). The frontier is here less energy per token at more interactivity. Points whose power the power gate refused are not drawn; the points table says why.</div>
{{else}}<div class="muted" id="no-energy">No point has valid power figures.</div>{{end}}

<h2>Latency coverage</h2>
<div class="muted">Neighbouring measured concurrencies of one config key whose median E2EL or median interactivity differ by more than x{{.Factor}}, with the concurrencies to add (log(metric) interpolated linearly in log(concurrency), steps within x{{.Factor}}). The same as <code>starter coverage</code>.</div>
{{if .Gaps}}<table id="coverage-gaps">
<tr><th>config key</th><th>metric</th><th>from</th><th>to</th><th>ratio</th><th>suggested</th></tr>
{{range .Gaps}}<tr class="gap-row"><td>{{.ConfigKey}}</td><td>{{.Metric}}</td><td class="n">{{.From}}</td><td class="n">{{.To}}</td><td class="n">{{.Ratio}}</td><td>{{.Add}}</td></tr>
{{end}}</table>
{{else}}<div id="no-gaps">No gaps wider than x{{.Factor}}.</div>{{end}}

{{if .HasBaseline}}
<h2>Regressions against {{.BaselineID}}</h2>
<div class="muted">Thresholds: output throughput per GPU down more than {{pct .Thresholds.OutputTputPerGPUDropPct}} %, TTFT p90 up more than {{pct .Thresholds.TTFTp90RisePct}} %, interactivity down more than {{pct .Thresholds.InteractivityDropPct}} %, joules per output token up more than {{pct .Thresholds.JoulesRisePct}} %, GSM8K down more than {{pct .EvalDropPts}} points or below its floor, a point that newly fails or is missing.</div>
<table id="finding-counts"><tr>{{range .Counts}}<th>{{.Name}}</th>{{end}}</tr><tr>{{range .Counts}}<td class="n">{{.Value}}</td>{{end}}</tr></table>
<table id="regressions">
<tr><th>point</th><th>conc</th><th>status</th><th>output tok/s/GPU<br>base → current</th><th>Δ</th><th>TTFT p90 ms<br>base → current</th><th>Δ</th><th>interactivity tok/s/user<br>base → current</th><th>Δ</th><th>GSM8K strict<br>base → current</th><th>Δ</th><th>findings</th></tr>
{{range .Regressions}}<tr class="regression-row">
<td>{{.PointID}}<div class="muted">{{.ConfigKey}}</div></td><td class="n">{{.Conc}}</td><td>{{.Status}}</td>
<td class="n {{.Tput.Class}}">{{.Tput.Base}} → {{.Tput.Cur}}</td><td class="n {{.Tput.Class}}">{{.Tput.Delta}}</td>
<td class="n {{.TTFT.Class}}">{{.TTFT.Base}} → {{.TTFT.Cur}}</td><td class="n {{.TTFT.Class}}">{{.TTFT.Delta}}</td>
<td class="n {{.Intvty.Class}}">{{.Intvty.Base}} → {{.Intvty.Cur}}</td><td class="n {{.Intvty.Class}}">{{.Intvty.Delta}}</td>
<td class="n {{.Eval.Class}}">{{.Eval.Base}} → {{.Eval.Cur}}</td><td class="n {{.Eval.Class}}">{{.Eval.Delta}}</td>
<td>{{range .Findings}}<div class="finding"><b>{{.Category}}</b>: {{.Message}}</div>{{else}}<span class="muted">none</span>{{end}}</td>
</tr>
{{end}}</table>
{{end}}

<h2>Points</h2>
{{range .Points}}<div class="point" id="point-{{.ID}}">
<h3>{{.ID}}</h3>
<table class="kv">
<tr><th>config key</th><td>{{.ConfigKey}}</td></tr>
<tr><th>topology</th><td>{{.Topology}}</td></tr>
<tr><th>concurrency</th><td>{{.Conc}}</td></tr>
<tr><th>status</th><td class="status-{{.Status}}">{{.Status}}{{if .FailedStage}} (at {{.FailedStage}}){{end}}{{if .Error}}<div class="muted">{{.Error}}</div>{{end}}</td></tr>
<tr><th>identity</th><td><code>{{.Identity}}</code></td></tr>
{{if .EvalOnly}}<tr><th>measures</th><td><b>eval-only</b>: GSM8K without the throughput benchmark</td></tr>{{end}}
{{if .Added}}<tr class="added"><th>added by</th><td><b>{{.Added.Mode}}</b> on {{.Added.Topology}}: {{.Served}}<div class="muted">{{.Added.Reason}}</div></td></tr>{{end}}
{{with .Perf}}<tr><th>output throughput / GPU</th><td class="n">{{num .OutputTputPerGPU 1}} tok/s/GPU</td></tr>
<tr><th>total throughput / GPU</th><td class="n">{{num .TputPerGPU 1}} tok/s/GPU</td></tr>
<tr><th>interactivity (median)</th><td class="n">{{num .Interactivity 1}} tok/s/user</td></tr>
<tr><th>TTFT p90</th><td class="n">{{num .TTFTp90Ms 1}} ms</td></tr>
<tr><th>TPOT median</th><td class="n">{{num .TPOTMedianMs 2}} ms</td></tr>
<tr><th>E2EL median</th><td class="n">{{num .E2ELMedianMs 1}} ms</td></tr>
{{with .Power}}{{if .Valid}}<tr class="power"><th>GPU energy</th><td class="n">{{num .JoulesPerOutputToken 3}} J/output token, {{num .JoulesPerTotalToken 3}} J/token, mean {{num .AvgPowerW 0}} W/GPU, p90 {{num .P90PowerW 0}} W/GPU ({{.Source}}{{if .Simulated}}, simulated{{end}})</td></tr>
{{else}}<tr class="power-invalid"><th>GPU energy</th><td><b>power-invalid</b> ({{.Source}}): {{.Reason}}</td></tr>{{end}}{{end}}{{end}}
{{with .Eval}}<tr><th>GSM8K</th><td>strict {{f4 .EMStrict}}, flexible {{f4 .EMFlexible}}, n={{.NEff}}, floor {{f2 .Floor}}: <b>{{pass .Passed}}</b></td></tr>{{end}}
{{if .Simulated}}<tr><th>data</th><td><b>simulated</b></td></tr>{{end}}
</table>
{{if .Stages}}<table class="stages">
<tr><th>stage</th><th>outcome</th><th>start</th><th>duration</th><th>rounds</th>{{if .Total}}<th>timeline ({{.Total}})</th>{{end}}</tr>
{{$total := .Total}}{{range .Stages}}<tr><td>{{.Stage}}</td><td>{{.Outcome}}{{if .Error}}<div class="muted">{{.Error}}</div>{{end}}</td><td class="n">{{.Start}}</td><td class="n">{{.Duration}}</td><td class="n">{{.Rounds}}</td>
{{if $total}}<td><div class="bar"><span style="left: {{pct .BarLeft}}%; width: {{pct .BarWidth}}%"></span></div></td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .StagesNote}}<div class="muted">{{.StagesNote}}</div>{{end}}
</div>
{{end}}
</body>
</html>
`
