package report

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/prereq"
)

// chromium finds Debian's chromium (or another Chromium-family binary).
// Absent: skip, unless CI=true, where .ci/run installs it and absence is a
// defect.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	prereq.Missing(t, "chromium not installed (apt-get install chromium; .ci/run installs it); skipping the browser rendering test")
	return ""
}

// runChromium runs one headless Chromium with a fresh profile, no network
// services and a hard 60 s limit.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	base := []string{"60", bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + profile}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "timeout", append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "chromium %v failed; stderr:\n%s", args, stderr.String())
	return stdout.Bytes()
}

// TestReportRendersInChromium renders a two-night report in headless
// Chromium and checks the charts are really drawn: the DOM after layout has
// both SVGs, each with one frontier curve per config key and run, a marker
// per point (dominated ones apart), the frontier across keys and the E2EL
// coverage gap; the screenshot has the curves' colours in two chart-sized
// areas, one above the other. REPORT_SCREENSHOT=path keeps the PNG.
func TestReportRendersInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	s := twoNights(t)
	in, err := Load(context.Background(), s, "night-2", "night-1")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, in))
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))
	url := "file://" + page

	dom := string(runChromium(t, bin, "--virtual-time-budget=5000", "--dump-dom", url))
	require.Contains(t, dom, `<svg id="pareto"`, "the browser's DOM has the interactivity chart")
	require.Contains(t, dom, `<svg id="e2el"`, "the browser's DOM has the E2EL chart")
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllStringIndex(dom, -1)) }
	// Per chart: two config keys in each night, two solid frontier curves and
	// two dashed ones, plus the frontier across keys for each night.
	assert.Equal(t, 4, count(`<polyline class="curve current"`), "current curves")
	assert.Equal(t, 4, count(`<polyline class="curve baseline"`), "baseline curves")
	assert.Equal(t, 2, count(`<polyline class="frontier-all current"`), "frontier across keys")
	assert.Equal(t, 2, count(`<polyline class="frontier-all baseline"[^>]*stroke-dasharray`), "baseline frontier across keys, dashed")
	// Night 1 has all 8 points; night 2 lost c1024 (missing) and c128
	// (failed). Night 1's c256 is dominated by its c128 on both charts.
	assert.Equal(t, 12, count(`<circle class="pt current `), "current markers")
	assert.Equal(t, 16, count(`<circle class="pt baseline `), "baseline markers")
	assert.Equal(t, 2, count(`<circle class="pt baseline dominated"`), "dominated baseline markers")
	assert.Equal(t, 8, count(`class="legend-entry"`), "legend entries")
	// E2EL gaps: c64-c256 (c128 failed) and the 24 s to 120 s jump.
	assert.Equal(t, 2, count(`<rect class="gap-band"`), "gap bands")
	assert.Equal(t, 3, count(`<path class="suggest"`), "suggested concurrencies")
	assert.Equal(t, 2, count(`<tr class="gap-row"`), "coverage table rows")
	assert.Equal(t, 2, count("SIMULATED DATA</text>"), "both chart titles say simulated")

	shot := filepath.Join(dir, "shot.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1400,2400", url)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	b := img.Bounds()
	require.Equal(t, 1400, b.Dx())
	require.Equal(t, 2400, b.Dy())
	if keep := os.Getenv("REPORT_SCREENSHOT"); keep != "" {
		data, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(keep, data, 0o644))
	}

	// The two config keys' colours (Okabe-Ito blue and vermillion) appear
	// only in the chart: find where they are and how many pixels they fill.
	want := map[string]color.RGBA{"blue": {0x00, 0x72, 0xB2, 0xff}, "vermillion": {0xD5, 0x5E, 0x00, 0xff}}
	box := image.Rectangle{Min: image.Pt(b.Max.X, b.Max.Y)}
	hits := map[string]int{}
	nonWhite := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			for name, w := range want {
				if near(c, w, 24) {
					hits[name]++
					box = box.Union(image.Rect(x, y, x+1, y+1))
				}
			}
			if c.R < 235 || c.G < 235 || c.B < 235 {
				nonWhite++
			}
		}
	}
	t.Logf("curve pixels %v in %v; non-white pixels %d", hits, box, nonWhite)
	for name := range want {
		assert.Greater(t, hits[name], 200, "%s curve pixels", name)
	}
	assert.Greater(t, box.Dx(), 300, "the curves span the chart's width")
	// Two charts stacked: the key colours run from the first chart's plot
	// down into the second's (each chart is about 740 px tall).
	assert.Greater(t, box.Dy(), 900, "the curves span both charts' height")
	// Inside that area the chart is drawn (grid, axes, curves, labels), not
	// a blank box.
	inChart := 0
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c.R < 235 || c.G < 235 || c.B < 235 {
				inChart++
			}
		}
	}
	assert.Greater(t, float64(inChart)/float64(box.Dx()*box.Dy()), 0.01, "non-white share inside the chart area")
}

func near(a, b color.RGBA, tol int) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(a.R, b.R) <= tol && d(a.G, b.G) <= tol && d(a.B, b.B) <= tol
}
