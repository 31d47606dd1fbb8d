package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// TestReportAdaptive: the report marks each added point (+c in the charts,
// "added by" with the gap or SLO it served in its section, a row in the
// adaptive table), and for an slo search draws the SLO line and the found
// concurrency on its deployment's curve, where the search put them.
func TestReportAdaptive(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	slo := point.SLO{Metric: point.SLOTTFTp99, Max: 2}
	// p99 TTFT is conc/400 s: c768 meets (1.92 s), c1024 misses (2.56 s).
	figure := func(conc int) point.PerfSummary {
		return point.PerfSummary{OutputTputPerGPU: 1000 + float64(conc), Interactivity: 80 - float64(conc)/40, TTFTp99Ms: float64(conc) * 2.5,
			E2ELMedianMs: float64(conc) * 50, Simulated: true}
	}
	k := adaptive.Key{Request: point.Adaptive{ConfigKey: disaggKey, Mode: point.AdaptiveSLO, SLO: &slo, Grid: point.Grid{Step: 128}, MaxPoints: 4}}
	k.Deployments = []adaptive.Deployment{{Key: "twop1d", Topology: "2P1D DEP16/DEP32", Nodes: 16, Concs: []int{512, 1280}, Searched: true, State: adaptive.Done}}
	pt := func(conc int, added *point.Added) {
		id := fmt.Sprintf("p-c%d", conc)
		spec, err := json.Marshal(point.Spec{PointID: id, ConfigKey: disaggKey, Topology: "2P1D DEP16/DEP32", Conc: conc, Nodes: 16, Added: added})
		require.NoError(t, err)
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "slo", PointID: id, Identity: fmt.Sprintf("twop1d-c%d", conc), ConfigKey: disaggKey,
			Topology: "2P1D DEP16/DEP32", Conc: conc, Status: point.StatusCompleted, SpecJSON: spec}))
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "slo", PointID: id, Identity: fmt.Sprintf("twop1d-c%d", conc), ConfigKey: disaggKey,
			Conc: conc, JSON: []byte(`{}`), PerfSummary: figure(conc)}))
		k.Points = append(k.Points, adaptive.Point{PointID: id, Deployment: "twop1d", Conc: conc, Added: added != nil, Perf: figure(conc)})
		if added != nil {
			k.Added = append(k.Added, adaptive.AddedPoint{PointID: id, Conc: conc, Added: *added})
		}
	}
	pt(512, nil)
	pt(1280, nil)
	for i, c := range []int{896, 768, 1024} {
		pt(c, &point.Added{Mode: point.AdaptiveSLO, Deployment: "twop1d", Topology: "2P1D DEP16/DEP32", SLO: &slo, Seq: i + 1,
			Reason: fmt.Sprintf("slo %s: bisecting", slo)})
	}
	k.Deployments[0].Found = &adaptive.Found{Conc: 768, Value: 1.92, Goodput: 1768, Above: 896, AboveValue: 2.24, Points: 5}
	k.Deployments[0].Stop = "slo done: c768 is the largest concurrency meeting p99_ttft <= 2 s"
	rec := activities.SweepRecord{SweepID: "slo", Name: "seed", Status: point.StatusCompleted, StartedAt: start, Adaptive: []adaptive.Key{k}}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "slo", ConfigJSON: string(data), Status: rec.Status, StartedAt: start}))

	in, err := Load(ctx, s, "slo", "")
	require.NoError(t, err)
	require.Len(t, in.Current.Adaptive, 1)
	require.Len(t, in.Current.Added, 3)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	page := buf.String()
	assertSelfContained(t, page)
	assert.Contains(t, page, "<th>Adaptive points</th><td>3 added on deployments whose server was up")
	assert.Contains(t, page, `id="adaptive"`)
	assert.Equal(t, 3, strings.Count(page, `class="added-row"`))
	assert.Equal(t, 3, strings.Count(page, `<tr class="added"><th>added by</th>`), "each added point's section says so")
	assert.Contains(t, page, "SLO p99_ttft &lt;= 2 s")
	assert.Contains(t, page, ">+c768<", "the charts label added points +c")
	assert.Contains(t, page, ">c512<")

	// The SLO chart: the SLO line at 2 s and the found concurrency's line
	// at c768, each where the axes put those values.
	svg := regexp.MustCompile(`(?s)<svg id="slo-twop1d"[^>]*>.*?</svg>`).FindString(page)
	require.NotEmpty(t, svg)
	assert.Equal(t, 5, strings.Count(svg, `class="slo-point`))
	assert.Equal(t, 3, strings.Count(svg, `class="slo-point slo-added"`))
	line := regexp.MustCompile(`<g class="slo-line"><line x1="[0-9.]+" y1="([0-9.]+)"`).FindStringSubmatch(svg)
	require.NotNil(t, line)
	found := regexp.MustCompile(`<g class="slo-found" data-conc="768"><line x1="([0-9.]+)"`).FindStringSubmatch(svg)
	require.NotNil(t, found, "the found concurrency is drawn")
	assert.Contains(t, svg, "c768: goodput 1768.0 tok/s/GPU")
	// Points above the line miss the SLO, below meet it (y grows down).
	y, _ := strconv.ParseFloat(line[1], 64)
	for _, m := range regexp.MustCompile(`cy="([0-9.]+)" r="5"[^>]*><title>c(\d+) \(\w+\): [^,]*, (meets|misses)`).FindAllStringSubmatch(svg, -1) {
		cy, _ := strconv.ParseFloat(m[1], 64)
		if m[3] == "meets" {
			assert.GreaterOrEqual(t, cy, y, "c%s meets: on or below the SLO line", m[2])
		} else {
			assert.Less(t, cy, y, "c%s misses: above the SLO line", m[2])
		}
	}
	x, _ := strconv.ParseFloat(found[1], 64)
	c768 := regexp.MustCompile(`cx="([0-9.]+)" cy="[0-9.]+" r="5"[^>]*><title>c768 `).FindStringSubmatch(svg)
	require.NotNil(t, c768)
	cx, _ := strconv.ParseFloat(c768[1], 64)
	assert.InDelta(t, cx, x, 0.1, "the found line goes through c768's point")
}
