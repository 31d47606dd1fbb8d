package curvegaps

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const disagg = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"

// seedLike is modelled on the seed PR's review: measured points at 20 s and
// 100 s median E2EL with nothing between them.
var seedLike = Curve{Key: disagg, Points: []Point{
	{Conc: 768, E2ELSeconds: 100, Interactivity: 217}, // unsorted on purpose
	{Conc: 64, E2ELSeconds: 8, Interactivity: 313},
	{Conc: 128, E2ELSeconds: 12, Interactivity: 293},
	{Conc: 256, E2ELSeconds: 20, Interactivity: 284},
	{Conc: 1024, E2ELSeconds: 140, Interactivity: 189},
}}

func TestCoverageFind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		curves []Curve
		factor float64
		want   []Gap
	}{
		{name: "seed complaint: nothing between 20 s and 100 s", curves: []Curve{seedLike}, factor: 2,
			want: []Gap{{ConfigKey: disagg, Metric: MetricE2EL, From: End{256, 20}, To: End{768, 100}, SuggestConc: []int{369, 533}}}},
		{name: "a factor of 5 accepts a 5x step", curves: []Curve{seedLike}, factor: 5, want: []Gap{}},
		{name: "a factor of 3 needs one point", curves: []Curve{seedLike}, factor: 3,
			want: []Gap{{ConfigKey: disagg, Metric: MetricE2EL, From: End{256, 20}, To: End{768, 100}, SuggestConc: []int{443}}}},
		{name: "interactivity gap, falling with concurrency", factor: 2, curves: []Curve{{Key: "k", Points: []Point{
			{Conc: 4, Interactivity: 400}, {Conc: 64, Interactivity: 50}, {Conc: 128, Interactivity: 40}}}},
			want: []Gap{{ConfigKey: "k", Metric: MetricIntvty, From: End{4, 400}, To: End{64, 50}, SuggestConc: []int{10, 25}}}},
		{name: "neighbouring integers: a gap, nothing to add", factor: 2, curves: []Curve{{Key: "k", Points: []Point{
			{Conc: 1, E2ELSeconds: 1}, {Conc: 2, E2ELSeconds: 4}}}},
			want: []Gap{{ConfigKey: "k", Metric: MetricE2EL, From: End{1, 1}, To: End{2, 4}, SuggestConc: []int{}}}},
		{name: "several shapes at one concurrency: the closest pair decides", factor: 2, curves: []Curve{{Key: "k", Points: []Point{
			{Conc: 64, E2ELSeconds: 15}, {Conc: 64, E2ELSeconds: 30}, {Conc: 128, E2ELSeconds: 31}, {Conc: 128, E2ELSeconds: 100}}}},
			want: []Gap{}},
		{name: "unmeasured metrics are left out", factor: 2, curves: []Curve{{Key: "k", Points: []Point{
			{Conc: 1, E2ELSeconds: 1}, {Conc: 8, E2ELSeconds: 0, Interactivity: 50}, {Conc: 16, E2ELSeconds: 1.5}, {Conc: 0, E2ELSeconds: 99}}}},
			want: []Gap{}},
		{name: "curves come out by key", factor: 2, curves: []Curve{
			{Key: "b", Points: []Point{{Conc: 1, E2ELSeconds: 1}, {Conc: 16, E2ELSeconds: 4}}},
			{Key: "a", Points: []Point{{Conc: 1, Interactivity: 100}, {Conc: 16, Interactivity: 25}}}},
			want: []Gap{
				{ConfigKey: "a", Metric: MetricIntvty, From: End{1, 100}, To: End{16, 25}, SuggestConc: []int{4}},
				{ConfigKey: "b", Metric: MetricE2EL, From: End{1, 1}, To: End{16, 4}, SuggestConc: []int{4}}}},
		{name: "empty", curves: nil, factor: 2, want: []Gap{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(tc.curves, tc.factor)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Gaps)
		})
	}
}

// TestCoverageSeedSuggestionLandsInTheRange checks the suggestion answers the
// reviewer: every suggested concurrency is predicted between 20 s and 100 s,
// and the steps it leaves are within the factor.
func TestCoverageSeedSuggestionLandsInTheRange(t *testing.T) {
	t.Parallel()
	res, err := Find([]Curve{seedLike}, 2)
	require.NoError(t, err)
	require.Len(t, res.Gaps, 1)
	g := res.Gaps[0]
	require.NotEmpty(t, g.SuggestConc)
	prev := g.From.Value
	for _, c := range g.SuggestConc {
		v := Predict(g.From, g.To, c)
		assert.Greater(t, v, 20.0, "c%d", c)
		assert.Less(t, v, 100.0, "c%d", c)
		assert.LessOrEqual(t, v/prev, 2.0+1e-2, "step to c%d", c)
		prev = v
	}
	assert.LessOrEqual(t, g.To.Value/prev, 2.0+1e-2, "last step")
}

func TestCoverageFindRejectsBadFactor(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0, 1, 0.5, -2, math.Inf(1), math.NaN()} {
		_, err := Find([]Curve{seedLike}, f)
		assert.Error(t, err, "factor %v", f)
	}
}

func TestCoverageSuggest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to End
		factor   float64
		want     []int
	}{
		{"doubling E2EL with doubling conc", End{64, 1}, End{1024, 16}, 2, []int{128, 256, 512}},
		{"ends given high to low", End{1024, 16}, End{64, 1}, 2, []int{128, 256, 512}},
		{"rounding merges nothing here", End{4, 1}, End{8, 8}, 2, []int{5, 6}},
		{"rounding merges targets", End{1, 1}, End{3, 100}, 2, []int{2}},
		{"within the factor", End{8, 1}, End{16, 2}, 2, []int{}},
		{"no room between", End{7, 1}, End{8, 10}, 2, []int{}},
		{"unmeasured end", End{8, 0}, End{64, 10}, 2, []int{}},
		{"wider factor, fewer points", End{1, 1}, End{64, 100}, 10, []int{8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Suggest(tc.from, tc.to, tc.factor))
		})
	}
}

func TestCoveragePredict(t *testing.T) {
	t.Parallel()
	assert.InDelta(t, 4.0, Predict(End{1, 1}, End{16, 16}, 4), 1e-9, "power law with exponent 1")
	assert.InDelta(t, 20.0, Predict(End{256, 20}, End{768, 100}, 256), 1e-9)
	assert.True(t, math.IsNaN(Predict(End{8, 1}, End{8, 2}, 8)))
}

func TestCoverageSuggestByKey(t *testing.T) {
	t.Parallel()
	r := Result{Gaps: []Gap{
		{ConfigKey: "a", SuggestConc: []int{32, 8}},
		{ConfigKey: "a", SuggestConc: []int{16, 8}},
		{ConfigKey: "b", SuggestConc: []int{}},
	}}
	assert.Equal(t, map[string][]int{"a": {8, 16, 32}}, r.SuggestByKey())
}

func TestCoverageJSONShape(t *testing.T) {
	t.Parallel()
	res, err := Find([]Curve{seedLike}, 2)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.JSONEq(t, `{"gaps":[{"config_key":"`+disagg+`","metric":"median_e2el","from":{"conc":256,"value":20},"to":{"conc":768,"value":100},"suggest_conc":[369,533]}]}`, string(b))
	res, err = Find(nil, 2)
	require.NoError(t, err)
	b, _ = json.Marshal(res)
	assert.JSONEq(t, `{"gaps":[]}`, string(b), "no gaps is an empty list, not null")
}

func TestCoverageCurveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		row  map[string]any
		want string
	}{
		{"config key wins", map[string]any{"config_key": "k1", "hw": "b200"}, "k1"},
		{"fixed-seq-len group", map[string]any{"infmax_model_prefix": "dsr1", "model": "deepseek-ai/DeepSeek-R1", "hw": "b200", "framework": "sglang",
			"precision": "fp8", "spec_decoding": "none", "disagg": false, "isl": 8192.0, "osl": 1024.0, "tp": 8.0},
			"dsr1 | b200 | sglang | fp8 | none | agg | fixed-seq-len | 8192/1024"},
		{"agentic group has no ISL/OSL", map[string]any{"infmax_model_prefix": "dsv4", "hw": "gb200", "framework": "dynamo-sglang", "precision": "fp4",
			"spec_decoding": "mtp", "disagg": true, "scenario_type": "agentic-coding", "isl": 0.0, "osl": 0.0},
			"dsv4 | gb200 | dynamo-sglang | fp4 | mtp | disagg | agentic-coding"},
		{"missing fields show", map[string]any{"model": "m", "isl": 1024.0, "osl": 1024.0}, "m | ? | ? | ? | none | agg | fixed-seq-len | 1024/1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, CurveKey(tc.row))
		})
	}
}

func TestCoverageFromBmk(t *testing.T) {
	t.Parallel()
	fixed := func(tp, conc int, e2el, intvty float64) map[string]any {
		return map[string]any{"infmax_model_prefix": "dsr1", "hw": "b200", "framework": "sglang", "precision": "fp8", "spec_decoding": "none",
			"disagg": false, "isl": 8192.0, "osl": 1024.0, "tp": float64(tp), "conc": float64(conc), "median_e2el": e2el, "median_intvty": intvty}
	}
	agentic := func(conc int, e2el, intvty float64, ok int) map[string]any {
		return map[string]any{"config_key": disagg, "conc": float64(conc), "scenario_type": "agentic-coding", "num_requests_successful": float64(ok),
			"request_metrics": map[string]any{"latency": map[string]any{"e2el": map[string]any{"p50": e2el}, "intvty": map[string]any{"p50": intvty}}}}
	}
	rows := []map[string]any{
		fixed(4, 4, 10, 110), fixed(8, 4, 6, 180), fixed(8, 64, 40, 30),
		agentic(256, 20, 284, 100), agentic(768, 100, 217, 90), agentic(1024, 0, 0, 0),
		{"hw": "b200", "median_e2el": 3.0},
	}
	curves, warnings := FromBmk(rows)
	require.Len(t, curves, 2)
	assert.Equal(t, "dsr1 | b200 | sglang | fp8 | none | agg | fixed-seq-len | 8192/1024", curves[0].Key)
	assert.Equal(t, []Point{{4, 10, 110}, {4, 6, 180}, {64, 40, 30}}, curves[0].Points, "both TP shapes on one curve")
	assert.Equal(t, []Point{{256, 20, 284}, {768, 100, 217}}, curves[1].Points)
	assert.Equal(t, []string{"row 5 (conc 1024): no successful request; skipped", "row 6: no concurrency; skipped"}, warnings)

	res, err := Find(curves, 2)
	require.NoError(t, err)
	// Fixed: c4 spans 6..10 s; c64 is 40 s -> 10 to 40 s (x4); 180/110 tok/s
	// at c4 against 30 at c64 -> 110 to 30 (x3.7).
	assert.Equal(t, []Gap{
		{ConfigKey: curves[0].Key, Metric: MetricE2EL, From: End{4, 10}, To: End{64, 40}, SuggestConc: []int{16}},
		{ConfigKey: curves[0].Key, Metric: MetricIntvty, From: End{4, 110}, To: End{64, 30}, SuggestConc: []int{16}},
		{ConfigKey: disagg, Metric: MetricE2EL, From: End{256, 20}, To: End{768, 100}, SuggestConc: []int{369, 533}},
	}, res.Gaps)
}

func TestCoverageReadBmk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, BmkFile), []byte(`[{"conc":4,"median_e2el":1.5}]`), 0o644))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"not":"a list"}`), 0o644))
	for _, p := range []string{dir, filepath.Join(dir, BmkFile)} {
		rows, err := ReadBmk(p)
		require.NoError(t, err)
		assert.Len(t, rows, 1)
	}
	_, err := ReadBmk(bad)
	assert.ErrorContains(t, err, "not an agg_bmk.json")
	_, err = ReadBmk(filepath.Join(dir, "missing.json"))
	assert.Error(t, err)
}
