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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	if v := strings.ToLower(os.Getenv("CI")); v == "true" || v == "1" {
		t.Fatal("chromium not found but CI=true: .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium not installed (apt-get install chromium); skipping the browser rendering test")
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
// Chromium and checks the chart is really drawn: the DOM after layout has the
// SVG with one curve per config key and run and a marker per point, and the
// screenshot has the curves' colours in a chart-sized area.
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
	require.Contains(t, dom, `<svg id="pareto"`, "the browser's DOM has the chart")
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllStringIndex(dom, -1)) }
	// Two config keys in each night: two solid curves, two dashed ones.
	assert.Equal(t, 2, count(`<polyline class="curve current"`), "current curves")
	assert.Equal(t, 2, count(`<polyline class="curve baseline"`), "baseline curves")
	// Night 1 has all 8 points; night 2 lost c1024 (missing) and c128 (failed).
	assert.Equal(t, 6, count(`<circle class="pt current"`), "current markers")
	assert.Equal(t, 8, count(`<circle class="pt baseline"`), "baseline markers")
	assert.Equal(t, 4, count(`class="legend-entry"`), "legend entries")
	assert.Contains(t, dom, "SIMULATED DATA")

	shot := filepath.Join(dir, "shot.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1400,1800", url)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	b := img.Bounds()
	require.Equal(t, 1400, b.Dx())
	require.Equal(t, 1800, b.Dy())

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
	assert.Greater(t, box.Dy(), 200, "the curves span the chart's height")
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
