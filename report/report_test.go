package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

const (
	aggKey    = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg"
	disaggKey = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"
)

// seedPoint is one point of the seed-like sweep the tests write.
type seedPoint struct {
	key  string
	conc int
	tput float64 // output tok/s/GPU
	ivty float64 // tok/s/user
	ttft float64 // ms
	eval float64 // 0: no eval
	e2el float64 // median, s
}

// The disagg curve has the seed review's complaint: nothing between 20 s
// (c256) and 100 s (c768) median E2EL; c256 is dominated by c128.
var seedPoints = []seedPoint{
	{aggKey, 1, 16, 353, 31, 0, 2.5},
	{aggKey, 4, 60, 340, 28, 0, 3},
	{disaggKey, 64, 450, 313, 90, 0.95, 8},
	{disaggKey, 128, 860, 293, 120, 0, 12},
	{disaggKey, 256, 840, 284, 180, 0.95, 20},
	{disaggKey, 768, 2100, 217, 900, 0.95, 100},
	{disaggKey, 1024, 2500, 189, 1300, 0, 140},
	{disaggKey, 1280, 2900, 166, 1600, 0.95, 170},
}

func pointID(p seedPoint) string { return fmt.Sprintf("%s-c%d", p.key[len(p.key)-6:], p.conc) }

// fillSweep writes a sweep; slow divides throughput and interactivity and
// multiplies TTFT for the disagg key (the simulator's --slowdown), skip
// leaves points out, failed marks points failed without figures.
func fillSweep(t *testing.T, s *results.Store, id string, start time.Time, slow float64, skip, failed map[int]bool, evalShift float64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: id, Name: "dsv4-gb200-agentx", Status: "completed", StartedAt: start, FinishedAt: start.Add(5 * time.Minute)}))
	for i, sp := range seedPoints {
		if skip[sp.conc] {
			continue
		}
		pid := pointID(sp)
		fp := fmt.Sprintf("fp-%s-%d", id, i)
		st := "completed"
		if failed[sp.conc] {
			st = "failed"
		}
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: id, PointID: pid, Identity: fp, BaselineKey: fmt.Sprintf("base-%d", i), ConfigKey: sp.key, ExpName: pid,
			Topology: "2P1D DEP16/DEP32", Conc: sp.conc, Status: st, FailedStage: map[bool]string{true: "perf"}[failed[sp.conc]]}))
		t0 := start.Add(time.Duration(i) * 20 * time.Second)
		runs := []results.StageRun{
			{Stage: "allocate", Outcome: "ok", Rounds: 1, StartedAt: t0, EndedAt: t0.Add(2 * time.Second)},
			{Stage: "bringup", Outcome: "ok", Rounds: 1, StartedAt: t0.Add(2 * time.Second), EndedAt: t0.Add(5 * time.Second)},
			{Stage: "perf", Outcome: "ok", Rounds: 1, StartedAt: t0.Add(5 * time.Second), EndedAt: t0.Add(15 * time.Second)},
		}
		if failed[sp.conc] {
			runs[2].Outcome, runs[2].Error = "failed", "engine crashed"
			require.NoError(t, s.PutStageRuns(ctx, id, pid, runs))
			continue
		}
		require.NoError(t, s.PutStageRuns(ctx, id, pid, runs))
		f := 1.0
		if sp.key == disaggKey {
			f = slow
		}
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: id, PointID: pid, Identity: fp, ConfigKey: sp.key, ExpName: pid, Conc: sp.conc, PerfSummary: point.PerfSummary{OutputTputPerGPU: sp.tput / f, Interactivity: sp.ivty / f, TTFTp90Ms: sp.ttft * f, TPOTMedianMs: 1000 / sp.ivty * f, E2ELMedianMs: sp.e2el * 1000 * f, Simulated: true}}))
		if sp.eval > 0 {
			score := sp.eval + evalShift
			require.NoError(t, s.PutEval(ctx, results.EvalResult{SweepID: id, PointID: pid, Identity: fp, EMStrict: score, EMFlexible: score,
				NEff: 1319, Floor: 0.91, Passed: score >= 0.91, Simulated: true}))
		}
	}
}

func openStore(t *testing.T) *results.Store {
	t.Helper()
	s, err := results.Open(context.Background(), filepath.Join(t.TempDir(), "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// twoNights writes a baseline night and a night slowed 1.2x with one point
// failing, one missing and the evals 3 points lower.
func twoNights(t *testing.T) *results.Store {
	s := openStore(t)
	day := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	fillSweep(t, s, "night-1", day, 1, nil, nil, 0)
	fillSweep(t, s, "night-2", day.Add(24*time.Hour), 1.2, map[int]bool{1024: true}, map[int]bool{128: true}, -0.03)
	return s
}

func TestReportChart(t *testing.T) {
	t.Parallel()
	cur := []Series{{Label: "a", Points: []XY{{X: 300, Y: 100, Conc: 4}, {X: 100, Y: 900, Conc: 64}, {X: 200, Y: 500, Conc: 16}}},
		{Label: "b", Points: []XY{{X: 50, Y: 1200, Conc: 256}}}}
	base := []Series{{Label: "a", Baseline: true, Points: []XY{{X: 310, Y: 120, Conc: 4}, {X: 110, Y: 950, Conc: 64}}}}
	tests := []struct {
		name           string
		series         []Series
		opts           ChartOptions
		curves, dashed int
		markers        int
		contains       []string
		notContains    []string
	}{
		{name: "current only", series: cur, opts: ChartOptions{Title: "T"}, curves: 1, markers: 4,
			contains:    []string{`<svg id="pareto"`, "Interactivity (tok/s/user)", "Output throughput per GPU (tok/s/GPU)", `data-config-key="a"`, `data-config-key="b"`, ">c64<"},
			notContains: []string{"SIMULATED", "stroke-dasharray", "log scale"}},
		{name: "with baseline, simulated", series: append(append([]Series{}, cur...), base...), opts: ChartOptions{Title: "T", Simulated: true},
			curves: 2, dashed: 1, markers: 6, contains: []string{"T — SIMULATED DATA", "a (baseline) [simulated]", `class="curve baseline"`}},
		{name: "wide range goes log", series: []Series{{Label: "x", Points: []XY{{X: 1, Y: 50000}, {X: 1000, Y: 5}}}}, curves: 1, markers: 2,
			contains: []string{"Interactivity (tok/s/user) (log scale)", "(tok/s/GPU) (log scale)"}},
		{name: "non-positive points are left out", series: []Series{{Label: "x", Points: []XY{{X: 0, Y: 5}, {X: 10, Y: 60}, {X: 20, Y: 50}}}}, curves: 1, markers: 2},
		{name: "a dominated point is a marker off the curve", series: []Series{{Label: "x", Points: []XY{{X: 10, Y: 60}, {X: 20, Y: 50}, {X: 9, Y: 40}}}},
			curves: 1, markers: 3, contains: []string{`class="pt current dominated"`, "x conc 0: 9 tok/s/user, 40.0 tok/s/GPU (dominated)"}},
		{name: "one frontier point: no curve", series: []Series{{Label: "x", Points: []XY{{X: 10, Y: 50}, {X: 20, Y: 60}}}}, curves: 0, markers: 2},
		{name: "frontier across keys, current and baseline", series: append(append([]Series{}, cur...), base...), opts: ChartOptions{FrontierAll: true},
			curves: 3, dashed: 1, markers: 6, contains: []string{`<polyline class="frontier-all current"`, "Pareto frontier across config keys"},
			notContains: []string{`frontier-all baseline`}}, // one baseline key: its curve is the frontier
		{name: "E2EL chart: lower latency is better", series: []Series{{Label: "x", Points: []XY{{X: 2, Y: 100, Conc: 1}, {X: 20, Y: 900, Conc: 64}, {X: 30, Y: 800, Conc: 96}}}},
			opts: ChartOptions{ID: "e2el", XLabel: "Median end-to-end latency (s)", XUnit: "s", XLowerBetter: true}, curves: 1, markers: 3,
			contains: []string{`<svg id="e2el"`, "Median end-to-end latency (s)", "x conc 96: 30 s, 800.0 tok/s/GPU (dominated)"}},
		{name: "gap band with suggestions", series: []Series{{Label: "x", Points: []XY{{X: 20, Y: 800, Conc: 256}, {X: 100, Y: 2100, Conc: 768}}}},
			opts: ChartOptions{ID: "e2el", XLowerBetter: true, Bands: []Band{{Label: "x", From: 20, To: 100, Text: "gap x5.0: add c369 c533",
				Suggest: []Mark{{X: 34.2, Conc: 369}, {X: 58.5, Conc: 533}}}}}, curves: 1, markers: 2,
			contains: []string{`<rect class="gap-band"`, "gap x5.0: add c369 c533", ">+c369<", ">+c533<", "coverage gap"}},
		{name: "empty", series: nil, curves: 0, markers: 0, contains: []string{"<svg", "</svg>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svg := Chart(tc.series, tc.opts)
			assert.Equal(t, tc.curves, strings.Count(svg, "<polyline "), "polylines")
			assert.Equal(t, tc.dashed, strings.Count(svg, `<polyline class="curve baseline"`), "dashed curves")
			assert.Equal(t, tc.markers, strings.Count(svg, "<circle "), "markers")
			for _, c := range tc.contains {
				assert.Contains(t, svg, c)
			}
			for _, c := range tc.notContains {
				assert.NotContains(t, svg, c)
			}
			assert.NotContains(t, svg, "NaN")
			assert.NotContains(t, svg, "Inf")
		})
	}
}

// TestReportChartCurveIsSortedAndMonotone checks the geometry: a curve runs left to
// right by interactivity, and higher throughput is drawn higher up.
func TestReportChartCurveIsSortedAndMonotone(t *testing.T) {
	t.Parallel()
	svg := Chart([]Series{{Label: "a", Points: []XY{{X: 300, Y: 100}, {X: 100, Y: 900}, {X: 200, Y: 500}}}}, ChartOptions{})
	m := regexp.MustCompile(`<polyline [^>]*points="([^"]+)"`).FindStringSubmatch(svg)
	require.Len(t, m, 2)
	var xs, ys []float64
	for _, pair := range strings.Fields(m[1]) {
		var x, y float64
		_, err := fmt.Sscanf(pair, "%f,%f", &x, &y)
		require.NoError(t, err)
		xs, ys = append(xs, x), append(ys, y)
	}
	require.Len(t, xs, 3)
	assert.Less(t, xs[0], xs[1])
	assert.Less(t, xs[1], xs[2])
	assert.Less(t, ys[0], ys[1], "900 tok/s/GPU is above 500")
	assert.Less(t, ys[1], ys[2])
}

func TestReportNiceStepAndTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, want float64
	}{{0.7, 1}, {1, 1}, {1.3, 2}, {3, 5}, {7, 10}, {240, 500}, {0.013, 0.02}, {0, 1}}
	for _, tc := range tests {
		assert.InDelta(t, tc.want, niceStep(tc.raw), 1e-12, "niceStep(%v)", tc.raw)
	}
	for v, want := range map[float64]string{0: "0", 250: "250", 12500: "12.5k", 2e6: "2M", 0.5: "0.5", 10000: "10k"} {
		assert.Equal(t, want, tickText(v), "tickText(%v)", v)
	}
}

func TestReportRenderWithBaseline(t *testing.T) {
	t.Parallel()
	s := twoNights(t)
	in, err := Load(context.Background(), s, "night-2", "night-1")
	require.NoError(t, err)
	in.Generated = time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()

	_, fs := in.Findings()
	counts := map[string]int{}
	for _, f := range fs {
		counts[regress.Category(f.Kind)]++
	}
	// 6 disagg points ran both nights, minus the one failing now: 4 slowed
	// 1.2x, each down 16.7 % in throughput and interactivity and up 20 % in
	// TTFT p90 -> 12 "slower"; 128 newly fails; 1024 is missing; 3 of the
	// remaining evals dropped 3 points (768, 1280, 256, 64 -> all four).
	assert.Equal(t, map[string]int{regress.CategorySlower: 12, regress.CategoryNewlyFailing: 1, regress.CategoryMissing: 1, regress.CategoryLessAccurate: 4}, counts)

	tests := []struct {
		name string
		want string
	}{
		{"title", "<title>sweepflow report: night-2</title>"},
		{"simulated banner", `id="simulated-banner"`},
		{"summary", `<th>Baseline</th><td>night-1</td>`},
		{"regression table", `<table id="regressions">`},
		{"slower finding", "<b>slower</b>: disagg-c768 output throughput per GPU"},
		{"newly failing", "<b>newly-failing</b>: disagg-c128 now failed"},
		{"missing", "<b>missing</b>: disagg-c1024 has a result in night-1 but none in this run"},
		{"less accurate", "<b>less-accurate</b>: disagg-c64 eval 0.9500 -&gt; 0.9200"},
		{"worse cell", `class="n worse">-16.7 %`},
		{"point section", `id="point-disagg-c768"`},
		{"stage timeline", `<td>perf</td><td>ok</td><td class="n">&#43;5.0 s</td><td class="n">10.0 s</td>`},
		{"failed stage error", "engine crashed"},
		{"timeline bar", `<div class="bar"><span style="left: `},
		{"chart", `<svg id="pareto"`},
		{"baseline dashed", `class="curve baseline"`},
		{"frontier across keys", `<polyline class="frontier-all current"`},
		{"baseline frontier across keys dashed", `<polyline class="frontier-all baseline" fill="none" stroke="#666" stroke-width="9" stroke-opacity="0.22" stroke-linejoin="round" stroke-dasharray="12 8"`},
		{"E2EL chart", `<svg id="e2el"`},
		{"E2EL axis", "Median end-to-end latency (s)"},
		// Night 2 is 1.2x slower: 24 s at c256, 120 s at c768.
		{"coverage table", `<td>` + disaggKey + `</td><td>median E2EL</td><td class="n">c256: 24 s</td><td class="n">c768: 120 s</td><td class="n">x5.0</td><td>add c369 c533</td>`},
		{"gap band on the E2EL chart", "gap x5.0: add c369 c533"},
		{"suggested concurrency marked", ">+c369<"},
		// c128 failed tonight, which opens a second gap that asks for it back.
		{"failed point leaves a gap", `<td class="n">c64: 9.6 s</td><td class="n">c256: 24 s</td><td class="n">x2.5</td><td>add c128</td>`},
		{"coverage in the summary", "<th>Coverage gaps</th><td>2 wider than x2 between neighbouring concurrencies</td>"},
		{"eval pass", "floor 0.91: <b>pass</b>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, page, tc.want)
		})
	}
	assertSelfContained(t, page)
}

// assertSelfContained fails on anything that would make the browser fetch:
// scripts, stylesheets, images, fonts or frames by URL.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href="} {
		assert.NotContains(t, page, bad)
	}
	// The only URL is the SVG namespace, which is a name, not a fetch.
	urls := regexp.MustCompile(`https?://[^"'\s<]+`).FindAllString(page, -1)
	for _, u := range urls {
		assert.Equal(t, "http://www.w3.org/2000/svg", u)
	}
}

func TestReportRenderWithoutBaselineAndLegacyLedger(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	// An older ledger: perf rows and stage outputs, no point rows or runs.
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "old", StartedAt: start}))
	require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "old", PointID: "p1", Identity: "f1", ConfigKey: aggKey, Conc: 4, PerfSummary: point.PerfSummary{OutputTputPerGPU: 60, Interactivity: 340}}))
	_, err := s.PutStageOutput(ctx, results.StageOutput{SweepID: "old", PointID: "p1", Identity: "f1", Stage: "perf", Attempt: 1, CreatedAt: start.Add(90 * time.Second)})
	require.NoError(t, err)
	in, err := Load(ctx, s, "old", "")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.NotContains(t, page, `id="regressions"`)
	assert.NotContains(t, page, "SIMULATED")
	assert.Contains(t, page, `id="point-p1"`)
	assert.Contains(t, page, "&#43;1m30s")
	assert.Contains(t, page, "the times are when each durable output was written")
	assert.Contains(t, page, `id="no-e2el"`, "no E2EL recorded: no E2EL chart")
	assert.NotContains(t, page, `<svg id="e2el"`)
	assert.Contains(t, page, `id="no-gaps"`)
	assertSelfContained(t, page)

	_, err = Load(ctx, s, "nope", "")
	require.ErrorIs(t, err, ErrNoSweep)
	_, err = Load(ctx, s, "old", "nope")
	require.ErrorContains(t, err, "baseline")
}

func TestReportFrontier(t *testing.T) {
	t.Parallel()
	pt := func(x, y float64) XY { return XY{X: x, Y: y} }
	tests := []struct {
		name             string
		pts              []XY
		xLowerBetter     bool
		front, dominated []XY
	}{
		{name: "trade-off curve: all on the frontier", pts: []XY{pt(300, 100), pt(100, 900), pt(200, 500)},
			front: []XY{pt(100, 900), pt(200, 500), pt(300, 100)}},
		{name: "seed c256 is dominated by c128", pts: []XY{pt(313, 450), pt(293, 860), pt(284, 840), pt(217, 2100)},
			front: []XY{pt(217, 2100), pt(293, 860), pt(313, 450)}, dominated: []XY{pt(284, 840)}},
		{name: "equal X: the higher Y wins", pts: []XY{pt(100, 50), pt(100, 80)}, front: []XY{pt(100, 80)}, dominated: []XY{pt(100, 50)}},
		{name: "duplicates both stay", pts: []XY{pt(100, 80), pt(100, 80)}, front: []XY{pt(100, 80), pt(100, 80)}},
		{name: "latency: lower X is better", xLowerBetter: true, pts: []XY{pt(2, 100), pt(20, 900), pt(30, 800), pt(25, 950)},
			front: []XY{pt(2, 100), pt(20, 900), pt(25, 950)}, dominated: []XY{pt(30, 800)}},
		{name: "invalid points are dropped", pts: []XY{pt(0, 10), pt(10, -1), pt(math.Inf(1), 5), pt(5, 5)}, front: []XY{pt(5, 5)}},
		{name: "empty", pts: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, d := Frontier(tc.pts, tc.xLowerBetter)
			assert.Equal(t, tc.front, f, "frontier")
			assert.ElementsMatch(t, tc.dominated, d, "dominated")
		})
	}
}

// TestRegressionRowsWithoutComparableBaseline: simulated figures next to a
// real baseline get no delta, and the row says why.
func TestRegressionRowsWithoutComparableBaseline(t *testing.T) {
	cur := regress.Point{Key: "k", SweepID: "emu", PointID: "c1", OK: true, Status: "completed", ProfileHash: "h",
		Perf: &regress.Perf{OutputTputPerGPU: 500, TTFTp90Ms: 100, Interactivity: 50, Simulated: true}}
	base := regress.Point{Key: "k", SweepID: "real", PointID: "c1", OK: true, Status: "completed", ProfileHash: "h",
		Perf: &regress.Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 100, Interactivity: 50}}
	rows := regressionRows(regress.Rows([]regress.Point{cur}, []regress.Point{base}, nil))
	require.Len(t, rows, 1)
	assert.Equal(t, "completed (no comparable baseline: simulated figures, the baseline's in real are real)", rows[0].Status)
	assert.Equal(t, cmpCell{Base: "-", Cur: "500.0"}, rows[0].Tput, "no delta against an incomparable baseline")
	base.Perf.Simulated = true
	rows = regressionRows(regress.Rows([]regress.Point{cur}, []regress.Point{base}, nil))
	assert.Equal(t, "-50.0 %", rows[0].Tput.Delta)
}

// A canary sweep's ledger row (the sweep workflow's RecordSweep) carries
// its canaries: the report says which failed, why, and what it saved.
func TestReportCanaries(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	rec := activities.SweepRecord{SweepID: "canary", Name: "dsv4-gb200-backends", Status: point.StatusFailed, StartedAt: start,
		Canaries: []point.Canary{
			{Image: "vllm/vllm-openai:v0.20.0", Backend: "dynamo-vllm", PointID: "vl_c8", Points: 2, NodeHours: 4.25, Verdict: point.CanaryFailed,
				Reason: "vl_c8 aborted at allocate: injected fault in allocate", NotStarted: 1, SavedNodeHours: 5.75},
			{Image: "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.0.0", Backend: "dynamo-trt", PointID: "trt_c8", Points: 2, NodeHours: 4.25, Verdict: point.CanaryPassed},
		}}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "canary", ConfigJSON: string(data), Status: rec.Status, StartedAt: start}))
	in, err := Load(ctx, s, "canary", "")
	require.NoError(t, err)
	require.Equal(t, rec.Canaries, in.Current.Canaries)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.Contains(t, page, "<th>Canaries</th><td>2 canaries: 1 passed, 1 failed; 1 point not started, 5.75 node-hours saved</td>")
	assert.Contains(t, page, `id="canary-table"`)
	assert.Equal(t, 2, strings.Count(page, `class="canary-row"`))
	assert.Contains(t, page, "vl_c8 aborted at allocate: injected fault in allocate")
	assertSelfContained(t, page)

	// A sweep without canaries shows none.
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "plain", ConfigJSON: `{"sweep_id":"plain"}`, StartedAt: start}))
	require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "plain", PointID: "p1", Identity: "f1", ConfigKey: aggKey, Conc: 4}))
	in, err = Load(ctx, s, "plain", "")
	require.NoError(t, err)
	buf.Reset()
	require.NoError(t, Render(&buf, in))
	assert.NotContains(t, buf.String(), `id="canaries"`)
}

// TestReportForecastAgainstActual: a forecast set against the sweep's stage
// runs: node time by stage kind from the runs (nodes from each point's
// spec), the makespan from the sweep's start to finish.
func TestReportForecastAgainstActual(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "sw", Status: "completed", StartedAt: start, FinishedAt: start.Add(150 * time.Minute)}))
	spec, err := json.Marshal(point.Spec{PointID: "p", Nodes: 6})
	require.NoError(t, err)
	require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: "p", Identity: "x-c64", ConfigKey: disaggKey, Conc: 64, Status: "completed", SpecJSON: spec}))
	at := start
	var runs []results.StageRun
	for _, r := range []struct {
		stage, outcome string
		min            int
	}{{"allocate", "ok", 10}, {"checkpoint", "ok", 5}, {"bringup", "ok", 25}, {"warmup", "ok", 5}, {"perf", "ok", 60},
		{"bringup", "ok", 20}, {"eval", "ok", 15}, {"teardown", "ok", 2}, {"upload", "ok", 1}} {
		d := time.Duration(r.min) * time.Minute
		runs = append(runs, results.StageRun{Stage: r.stage, Outcome: point.Outcome(r.outcome), Rounds: 1, StartedAt: at, EndedAt: at.Add(d)})
		at = at.Add(d)
	}
	require.NoError(t, s.PutStageRuns(ctx, "sw", "p", runs))
	in, err := Load(ctx, s, "sw", "")
	require.NoError(t, err)
	assert.Nil(t, in.ForecastCheck(), "no forecast, no comparison")
	in.Forecast = &forecast.Cluster{NodeHours: 12, MakespanHours: 2, NodeHoursByStage: map[string]float64{forecast.KindBringUp: 2, forecast.KindPerf: 6}}
	rows := in.ForecastCheck()
	require.Len(t, rows, 2+len(forecast.Kinds))
	// 6 nodes x (5 + 25 + 5 + 60 + 20 + 15 + 2) min = 13.2 node-hours; the
	// queue wait and the upload hold no node.
	assert.Equal(t, ForecastRow{What: "node-hours", Forecast: 12, Actual: 6 * 132.0 / 60}, rows[0])
	assert.Equal(t, ForecastRow{What: "  bring-up", Forecast: 2, Actual: 6 * 30.0 / 60}, rows[1], "checkpoint staging counts as bring-up")
	assert.Equal(t, ForecastRow{What: "  eval-restart", Forecast: 0, Actual: 6 * 20.0 / 60}, rows[4])
	assert.Equal(t, ForecastRow{What: "makespan (hours)", Forecast: 2, Actual: 2.5}, rows[len(rows)-1])
	assert.Equal(t, "forecast vs actual: 12.0 vs 13.2 node-hours, makespan 2:00:00 vs 2:30:00", in.ForecastLine())
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.Contains(t, page, `<table id="forecast">`)
	assert.Regexp(t, `<th>node-hours</th><td class="n">12.0</td><td class="n">13.2</td><td class="n">1.10</td>`, page)
	assert.Contains(t, page, "the sweep workflow in virtual time")
}

// TestReportShowsFailedAttempts: the ledger's failed attempts reach the page
// with their class and evidence, classes ranked by attempts, and the
// summary counts them.
func TestReportShowsFailedAttempts(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "sw", Status: "completed", StartedAt: start}))
	require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: "p", Identity: "x-c64", ConfigKey: disaggKey, Conc: 64, Status: "completed"}))
	oom := failure.Attempt{Failure: failure.Failure{Class: failure.CUDAOOM, Excerpt: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}, At: start.Add(3 * time.Minute)}
	budget := failure.Attempt{Failure: failure.Failure{Class: failure.HealthBudget, Excerpt: "budget 30m0s ran out: 3/4 workers registered (prefill 2/2, decode 1/2), phase loading weights"}, At: start.Add(40 * time.Minute)}
	oom2 := oom
	oom2.At = start.Add(5 * time.Minute)
	require.NoError(t, s.PutStageRuns(ctx, "sw", "p", []results.StageRun{
		{Stage: "allocate", Outcome: "ok", Rounds: 1, StartedAt: start, EndedAt: start.Add(time.Minute)},
		{Stage: "bringup", Outcome: "ok", Rounds: 3, StartedAt: start.Add(time.Minute), EndedAt: start.Add(50 * time.Minute),
			Failures: []failure.Attempt{oom, oom2, budget}},
	}))
	in, err := Load(ctx, s, "sw", "")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.Contains(t, page, `<h2 id="failures">Failed attempts</h2>`)
	assert.Regexp(t, `(?s)<table id="failure-classes">.*<code>cuda-oom</code></td><td class="n">2</td>.*<code>health-budget</code></td><td class="n">1</td>.*</table>`, page)
	assert.Equal(t, 3, strings.Count(page, `<tr class="failure-row">`))
	assert.Contains(t, page, "<code>budget 30m0s ran out: 3/4 workers registered (prefill 2/2, decode 1/2), phase loading weights</code>")
	assert.Contains(t, page, "Failed attempts</th><td>3 (cuda-oom 2, health-budget 1)")
}

// TestReportShowsAttemptEvidence: with the attempt ledger, each failed or
// lost attempt is a row with its attempt number, the error it ended with,
// its last heartbeat and its worker; the workflow's view of the same
// budget (stage_failures) is not listed again.
func TestReportShowsAttemptEvidence(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "sw", Status: "completed", StartedAt: start}))
	require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: "p", Identity: "x-c64", ConfigKey: disaggKey, Conc: 64, Status: "completed"}))
	lost := failure.Attempt{Failure: failure.Failure{Class: failure.LostWorker, Excerpt: "no heartbeat within the heartbeat timeout"}, At: start.Add(3 * time.Minute)}
	require.NoError(t, s.PutStageRuns(ctx, "sw", "p", []results.StageRun{
		{Stage: "perf", Outcome: "ok", Rounds: 1, StartedAt: start, EndedAt: start.Add(9 * time.Minute), Failures: []failure.Attempt{lost}}}))
	for _, a := range []results.StageAttempt{
		{Attempt: 1, Outcome: results.AttemptFailed, Class: failure.Injected, ErrorType: "InjectedFault", Message: "injected fault in perf (1 of 2)",
			Excerpt: "injected fault in perf (1 of 2)", Worker: "11@login@q", StartedAt: start, EndedAt: start.Add(time.Minute)},
		{Attempt: 2, Outcome: results.AttemptLost, Class: failure.LostWorker, ErrorType: "Timeout", Message: "no result from worker 11@login@q",
			Excerpt: "no heartbeat within the heartbeat timeout", Heartbeat: `"measuring: 12 of 64 lanes"`, Worker: "11@login@q",
			StartedAt: start.Add(2 * time.Minute), EndedAt: start.Add(3 * time.Minute)},
		{Attempt: 3, Outcome: results.AttemptOK, Worker: "12@login@q", StartedAt: start.Add(4 * time.Minute), EndedAt: start.Add(9 * time.Minute)},
	} {
		a.WorkflowID, a.RunID, a.ActivityID, a.SweepID, a.PointID, a.Stage = "sw/p", "r", "5", "sw", "p", "perf"
		require.NoError(t, s.StartAttempt(ctx, a))
		_, err := s.EndAttempt(ctx, a)
		require.NoError(t, err)
	}
	in, err := Load(ctx, s, "sw", "")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.Equal(t, 2, strings.Count(page, `<tr class="failure-row">`), "the two failed attempts, not the workflow's view again")
	assert.Contains(t, page, `<td class="n">2</td><td><code>lost-worker</code></td><td><code>no heartbeat within the heartbeat timeout</code></td><td><code>Timeout: no result from worker 11@login@q</code></td><td><code>&#34;measuring: 12 of 64 lanes&#34;</code></td><td>11@login@q</td>`)
	assert.Contains(t, page, "Failed attempts</th><td>2 (injected 1, lost-worker 1)")
}

// TestReportShowsNodeHours: the node-hours section books a 2-node point
// whose bring-up hit two CUDA OOMs and a health budget. By hand (minutes
// from the start, x2 nodes): allocation [1,51] = 100; OOM attempts [1,3]
// and [3,5] 8; operator hold [5,38] 66 (the third attempt is taken to last
// as long as the first, 2 min); health budget [38,40] 4; hold [40,48] 16;
// bring-up [48,50] 4; teardown [50,51] 2.
func TestReportShowsNodeHours(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return start.Add(time.Duration(min) * time.Minute) }
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "sw", Status: "completed", StartedAt: start}))
	require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: "p", Identity: "x-c64", ConfigKey: disaggKey, Conc: 64,
		Status: "completed", SpecJSON: []byte(`{"nodes":2}`)}))
	f := func(c failure.Class, min int) failure.Attempt {
		return failure.Attempt{Failure: failure.Failure{Class: c, Excerpt: string(c)}, At: at(min)}
	}
	require.NoError(t, s.PutStageRuns(ctx, "sw", "p", []results.StageRun{
		{Stage: "allocate", Outcome: "ok", Rounds: 1, StartedAt: at(0), EndedAt: at(1)},
		{Stage: "bringup", Outcome: "ok", Rounds: 3, StartedAt: at(1), EndedAt: at(50),
			Failures: []failure.Attempt{f(failure.CUDAOOM, 3), f(failure.CUDAOOM, 5), f(failure.HealthBudget, 40)}},
		{Stage: "teardown", Outcome: "ok", Rounds: 1, StartedAt: at(50), EndedAt: at(51)},
	}))
	in, err := Load(ctx, s, "sw", "")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assert.Contains(t, page, `<h2 id="node-hours">Where the node-hours went</h2>`)
	assert.Contains(t, page, "100.0 node-minutes (1.67 node-hours) in 1 allocations; useful fraction 0.0 %")
	for cat, v := range map[string]string{"held-for-operator": "82.000", "failed:cuda-oom": "8.000", "failed:health-budget": "4.000", "bring-up": "4.000", "teardown": "2.000"} {
		assert.Contains(t, page, `<rect class="nh-bar" data-category="`+cat+`" data-node-minutes="`+v+`"`)
	}
	assert.Equal(t, 5, strings.Count(page, `class="nh-bar"`))
	assert.Regexp(t, `(?s)<table id="node-hours-classes">.*<code>cuda-oom</code></td><td class="n">2</td><td class="n">8.0</td>.*<code>health-budget</code></td><td class="n">1</td><td class="n">4.0</td>`, page)
}
