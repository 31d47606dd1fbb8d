package report

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// powerSweep writes the seed-like sweep with power figures: 700 W per GPU
// over each point's output throughput per GPU gives its joules per output
// token (so c256, dominated on throughput by c128, is dominated here too),
// except c1024, whose power the gate refused. withPower false writes the
// same sweep without power.
func powerSweep(t *testing.T, withPower bool) *results.Store {
	s := openStore(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "sw", Name: "dsv4-gb200-agentx", Status: "completed", StartedAt: start, FinishedAt: start.Add(time.Minute)}))
	for i, sp := range seedPoints {
		pid := pointID(sp)
		fp := fmt.Sprintf("fp-%d", i)
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: pid, Identity: fp, ConfigKey: sp.key, ExpName: pid,
			Topology: "2P1D DEP16/DEP32", Conc: sp.conc, Status: "completed"}))
		sum := point.PerfSummary{OutputTputPerGPU: sp.tput, Interactivity: sp.ivty, TTFTp90Ms: sp.ttft, E2ELMedianMs: sp.e2el * 1000, Simulated: true}
		if withPower {
			sum.Power = &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, JoulesPerOutputToken: 700 / sp.tput,
				JoulesPerTotalToken: 70 / sp.tput, AvgPowerW: 700, P90PowerW: 760}
			if sp.conc == 1024 {
				sum.Power = &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Reasons: []string{energy.ReasonGap}}
			}
		}
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pid, Identity: fp, ConfigKey: sp.key, ExpName: pid, Conc: sp.conc, PerfSummary: sum}))
	}
	return s
}

// TestEnergyChartLowerIsBetter: on the energy chart the frontier is less
// energy per token at more interactivity.
func TestEnergyChartLowerIsBetter(t *testing.T) {
	svg := Chart([]Series{{Label: "x", Points: []XY{{X: 10, Y: 2, Conc: 1}, {X: 20, Y: 3, Conc: 2}, {X: 9, Y: 4, Conc: 4}}}},
		ChartOptions{ID: "energy", YLabel: "GPU energy per output token (J/token)", YUnit: "J/token", YLowerBetter: true})
	assert.Contains(t, svg, "x conc 4: 9 tok/s/user, 4 J/token (dominated)")
	assert.Contains(t, svg, "x conc 1: 10 tok/s/user, 2 J/token (frontier)")
	assert.Contains(t, svg, "x conc 2: 20 tok/s/user, 3 J/token (frontier)")
	assert.Contains(t, svg, "GPU energy per output token (J/token)")
}

// TestEnergyFrontierRendersInChromium renders the report of a sweep with
// power figures in headless Chromium: the DOM after layout has the energy
// chart with one frontier per config key, a marker for each of the 7 points
// whose power is valid (c256 dominated), the simulated label, and the
// power-invalid point's reason in its table; the screenshot has the key
// colours well below where the same report without power ends its charts.
func TestEnergyFrontierRendersInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	render := func(withPower bool) string {
		in, err := Load(context.Background(), powerSweep(t, withPower), "sw", "")
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, Render(&buf, in))
		page := filepath.Join(t.TempDir(), "report.html")
		require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))
		return "file://" + page
	}
	withURL, withoutURL := render(true), render(false)

	dom := string(runChromium(t, bin, "--virtual-time-budget=5000", "--dump-dom", withURL))
	i := strings.Index(dom, `<svg id="energy"`)
	require.GreaterOrEqual(t, i, 0, "the browser's DOM has the energy chart")
	svg := dom[i : i+strings.Index(dom[i:], "</svg>")]
	count := func(s, re string) int { return len(regexp.MustCompile(re).FindAllStringIndex(s, -1)) }
	assert.Equal(t, 2, count(svg, `<polyline class="curve current"`), "one frontier per config key")
	assert.Equal(t, 1, count(svg, `<polyline class="frontier-all current"`), "the frontier across keys")
	assert.Equal(t, 7, count(svg, `<circle class="pt current `), "a marker per point with valid power")
	assert.Equal(t, 1, count(svg, `<circle class="pt current dominated"`), "c256 is dominated")
	assert.Contains(t, svg, "Energy per output token vs interactivity — SIMULATED DATA")
	assert.Contains(t, svg, "GPU energy per output token (J/token)")
	assert.Contains(t, svg, "disagg conc 128: 293 tok/s/user, 0.814 J/token (frontier)")
	assert.Regexp(t, `power-invalid</b> \(simulated\): sampling_gap_exceeded`, dom)
	noPower := string(runChromium(t, bin, "--virtual-time-budget=5000", "--dump-dom", withoutURL))
	assert.NotContains(t, noPower, `<svg id="energy"`)
	assert.Contains(t, noPower, `id="no-energy"`)

	// The key colours' lowest pixel: the energy chart adds a chart below.
	lowest := func(url string) int {
		shot := filepath.Join(t.TempDir(), "shot.png")
		runChromium(t, bin, "--screenshot="+shot, "--window-size=1400,4000", url)
		f, err := os.Open(shot)
		require.NoError(t, err)
		defer f.Close()
		img, err := png.Decode(f)
		require.NoError(t, err)
		blue := color.RGBA{0x00, 0x72, 0xB2, 0xff}
		low, hits := 0, 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if near(color.RGBAModel.Convert(img.At(x, y)).(color.RGBA), blue, 24) {
					low, hits = y, hits+1
				}
			}
		}
		require.Greater(t, hits, 200, "curve pixels")
		return low
	}
	with, without := lowest(withURL), lowest(withoutURL)
	t.Logf("lowest key-colour pixel: %d with power, %d without", with, without)
	assert.Greater(t, with-without, 400, "the energy chart is drawn below the other two")
}
