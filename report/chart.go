package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Series is one config key's points in one run. The curve drawn through
// them is their Pareto frontier; dominated points are markers only.
type Series struct {
	Label    string // the config key
	Baseline bool   // drawn dashed
	Points   []XY
}

// XY is one point: x is interactivity (tok/s/user) or median E2EL (s), y
// output throughput per GPU; Conc and Label go into the tooltip.
type XY struct {
	X, Y  float64
	Conc  int
	Label string
	// Added names the adaptive search that added the point (fill, slo):
	// its label reads +c<conc>.
	Added string
}

// Band shades a coverage gap along the x axis of one config key's curve,
// with the suggested concurrencies marked where the interpolation puts them.
type Band struct {
	Label    string // the config key (its colour)
	From, To float64
	Text     string
	Suggest  []Mark
}

// Mark is a suggested concurrency at its interpolated x.
type Mark struct {
	X    float64
	Conc int
}

// ChartOptions set the chart's text and kind.
type ChartOptions struct {
	Title     string
	Simulated bool // says so in the title and the legend
	Width     int  // default 1000
	Height    int  // default 560
	// ID is the svg element's id: "pareto" (default) or "e2el".
	ID string
	// XLabel and XUnit name the x axis (default interactivity); XLowerBetter
	// turns the frontier around for latency.
	XLabel, XUnit string
	XLowerBetter  bool
	// XLogAbove makes the x axis logarithmic when the data span more than
	// this ratio (0: 100). Latency from c1 to c1000 spans tens of times and
	// crowds the low concurrencies on a linear axis.
	XLogAbove float64
	// YLabel and YUnit name the y axis (default output throughput per
	// GPU); YLowerBetter turns the frontier around for a cost (joules per
	// token).
	YLabel, YUnit string
	YLowerBetter  bool
	// FrontierAll draws the frontier across every config key of a run.
	FrontierAll bool
	Bands       []Band
}

// The palette is Okabe-Ito, readable for colour-blind viewers; a baseline
// curve takes its config key's colour, dashed.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// axis maps data values to pixels, linear or log10.
type axis struct {
	lo, hi   float64
	log      bool
	pxLo     float64
	pxHi     float64
	ticks    []float64
	label    string
	tickText func(float64) string
}

func (a axis) px(v float64) float64 {
	if a.log {
		v, lo, hi := math.Log10(v), math.Log10(a.lo), math.Log10(a.hi)
		return a.pxLo + (v-lo)/(hi-lo)*(a.pxHi-a.pxLo)
	}
	return a.pxLo + (v-a.lo)/(a.hi-a.lo)*(a.pxHi-a.pxLo)
}

// newAxis picks a linear axis from 0, or a log axis when the data spans more
// than logAbove (0: two decades; simulated runs at different time scales do).
func newAxis(vals []float64, pxLo, pxHi float64, label string, logAbove float64) axis {
	if logAbove <= 1 {
		logAbove = 100
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	a := axis{pxLo: pxLo, pxHi: pxHi, label: label, tickText: tickText}
	if hi/lo > logAbove {
		a.log = true
		a.lo = math.Pow(10, math.Floor(math.Log10(lo)))
		a.hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		for d := a.lo; d <= a.hi*1.0001; d *= 10 {
			a.ticks = append(a.ticks, d)
		}
		a.label += " (log scale)"
		return a
	}
	step := niceStep(hi / 5)
	a.lo, a.hi = 0, math.Ceil(hi*1.05/step)*step
	for v := 0.0; v <= a.hi+step/2; v += step {
		a.ticks = append(a.ticks, v)
	}
	return a
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tickText(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case v >= 1e4:
		return trimZero(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	case v >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// Chart draws the InferenceX chart: output throughput per GPU (y) against
// interactivity in tok/s/user (x), or against median E2EL. Each config key's
// Pareto frontier is its curve; its dominated points are small faded
// markers; baseline curves are dashed with hollow markers; with FrontierAll
// a wide grey band traces the frontier across keys (dashed for the
// baseline). Gap bands shade coverage gaps. It returns a standalone <svg>
// element with no external references.
func Chart(series []Series, o ChartOptions) string {
	if o.Width == 0 {
		o.Width = 1000
	}
	if o.Height == 0 {
		o.Height = 560
	}
	if o.ID == "" {
		o.ID = "pareto"
	}
	if o.XLabel == "" {
		o.XLabel, o.XUnit = "Interactivity (tok/s/user)", "tok/s/user"
	}
	if o.YLabel == "" {
		o.YLabel, o.YUnit = "Output throughput per GPU (tok/s/GPU)", "tok/s/GPU"
	}
	const left, right, top, bottom = 90.0, 30.0, 56.0, 70.0
	type frontierAll struct {
		baseline bool
		pts      []XY
	}
	var alls []frontierAll
	if o.FrontierAll {
		for _, base := range []bool{false, true} {
			var pts []XY
			n := 0
			for _, s := range series {
				if s.Baseline == base {
					pts = append(pts, s.Points...)
					n++
				}
			}
			if n > 1 { // with one key its own curve is the frontier
				f, _ := o.frontier(pts)
				alls = append(alls, frontierAll{base, f})
			}
		}
	}
	legendN := len(series) + len(alls) + 1
	if len(o.Bands) > 0 {
		legendN++
	}
	legendH := 22.0 * float64(legendN)
	plotBottom := float64(o.Height) - bottom
	h := float64(o.Height) + legendH

	var xs, ys []float64
	for _, s := range series {
		for _, p := range s.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
	}
	for _, b := range o.Bands {
		xs = append(xs, b.From, b.To)
	}
	ax := newAxis(xs, left, float64(o.Width)-right, o.XLabel, o.XLogAbove)
	ay := newAxis(ys, plotBottom, top, o.YLabel, 0)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" role="img" aria-label="%s">`,
		html.EscapeString(o.ID), o.Width, h, o.Width, h, html.EscapeString(o.Title))
	b.WriteString(`<rect x="0" y="0" width="100%" height="100%" fill="#ffffff"/>`)
	title := o.Title
	if o.Simulated {
		title += " — SIMULATED DATA"
	}
	fmt.Fprintf(&b, `<text class="chart-title" x="%.0f" y="28" text-anchor="middle" font-size="18" font-weight="bold" fill="#111">%s</text>`,
		float64(o.Width)/2, html.EscapeString(title))

	colors := map[string]string{}
	for _, s := range series {
		if _, ok := colors[s.Label]; !ok {
			colors[s.Label] = palette[len(colors)%len(palette)]
		}
	}
	for _, bd := range o.Bands {
		if _, ok := colors[bd.Label]; !ok {
			colors[bd.Label] = palette[len(colors)%len(palette)]
		}
	}

	// Gap bands under everything else, so points stay readable.
	for i, bd := range o.Bands {
		if !(bd.From > 0 && bd.To > 0) {
			continue
		}
		x1, x2 := ax.px(math.Min(bd.From, bd.To)), ax.px(math.Max(bd.From, bd.To))
		c := colors[bd.Label]
		fmt.Fprintf(&b, `<g class="gap" data-config-key="%s"><rect class="gap-band" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.10" stroke="%s" stroke-opacity="0.5" stroke-dasharray="3 3"><title>%s</title></rect>`,
			html.EscapeString(bd.Label), x1, top, x2-x1, plotBottom-top, c, c, html.EscapeString(bd.Label+": "+bd.Text))
		fmt.Fprintf(&b, `<text class="gap-label" x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="%s">%s</text>`,
			(x1+x2)/2, top+14+14*float64(i%3), c, html.EscapeString(bd.Text))
		for _, m := range bd.Suggest {
			if !(m.X > 0) || math.IsNaN(m.X) {
				continue
			}
			x := ax.px(m.X)
			fmt.Fprintf(&b, `<path class="suggest" d="M%.1f %.1f l-6 10 h12 z" fill="%s"><title>%s</title></path>`,
				x, plotBottom-12, c, html.EscapeString(fmt.Sprintf("%s: add conc %d (interpolated %.3g %s)", bd.Label, m.Conc, m.X, o.XUnit)))
			fmt.Fprintf(&b, `<text class="suggest-label" x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">+c%d</text>`, x, plotBottom-16, c, m.Conc)
		}
		b.WriteString(`</g>`)
	}

	// Grid and ticks.
	b.WriteString(`<g class="grid" stroke="#e3e3e3" stroke-width="1">`)
	for _, t := range ax.ticks {
		x := ax.px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, top, x, plotBottom)
	}
	for _, t := range ay.ticks {
		y := ay.px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, left, y, ax.pxHi, y)
	}
	b.WriteString(`</g>`)
	b.WriteString(`<g class="axes" stroke="#333" stroke-width="1.5">`)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, left, plotBottom, ax.pxHi, plotBottom)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, left, top, left, plotBottom)
	b.WriteString(`</g><g class="ticks" font-size="12" fill="#333">`)
	for _, t := range ax.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, ax.px(t), plotBottom+18, ax.tickText(t))
	}
	for _, t := range ay.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, left-8, ay.px(t), ay.tickText(t))
	}
	b.WriteString(`</g>`)
	fmt.Fprintf(&b, `<text class="x-label" x="%.1f" y="%.1f" text-anchor="middle" font-size="14" fill="#111">%s</text>`,
		(left+ax.pxHi)/2, plotBottom+44, html.EscapeString(ax.label))
	fmt.Fprintf(&b, `<text class="y-label" x="%.1f" y="%.1f" text-anchor="middle" font-size="14" fill="#111" transform="rotate(-90 %.1f %.1f)">%s</text>`,
		22.0, (top+plotBottom)/2, 22.0, (top+plotBottom)/2, html.EscapeString(ay.label))

	// The frontier across keys: a wide translucent band the per-key curves
	// run along where they are the best.
	for _, fa := range alls {
		kind, dash := "current", ""
		if fa.baseline {
			kind, dash = "baseline", ` stroke-dasharray="12 8"`
		}
		if len(fa.pts) > 1 {
			fmt.Fprintf(&b, `<polyline class="frontier-all %s" fill="none" stroke="#666" stroke-width="9" stroke-opacity="0.22" stroke-linejoin="round"%s points="%s"/>`,
				kind, dash, coords(fa.pts, ax, ay))
		}
	}

	// Curves: baselines first, so the current run is drawn on top.
	var labels labelPlacer
	ordered := append([]Series(nil), series...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Baseline && !ordered[j].Baseline })
	for _, s := range ordered {
		front, dominated := o.frontier(s.Points)
		color := colors[s.Label]
		kind, dash, width, opacity := "current", "", 2.5, 1.0
		if s.Baseline {
			kind, dash, width, opacity = "baseline", ` stroke-dasharray="8 5"`, 2.0, 0.75
		}
		fmt.Fprintf(&b, `<g class="series %s" data-config-key="%s">`, kind, html.EscapeString(s.Label))
		if len(front) > 1 {
			fmt.Fprintf(&b, `<polyline class="curve %s" fill="none" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f"%s points="%s"/>`,
				kind, color, width, opacity, dash, coords(front, ax, ay))
		}
		marker := func(p XY, onFront bool) {
			fill, r, fillOp, role := color, 5.0, 1.0, "frontier"
			if s.Baseline {
				fill = "#ffffff"
			}
			if !onFront {
				r, fillOp, role = 3.5, 0.35, "dominated"
			}
			label, cls, tip := fmt.Sprintf("c%d", p.Conc), "", ""
			if p.Added != "" {
				label, cls, tip = "+"+label, " added", ", added by "+p.Added
			}
			fmt.Fprintf(&b, `<circle class="pt %s %s%s" cx="%.1f" cy="%.1f" r="%.1f" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-width="2"><title>%s</title></circle>`,
				kind, role, cls, ax.px(p.X), ay.px(p.Y), r, fill, fillOp, color,
				html.EscapeString(fmt.Sprintf("%s conc %d: %.3g %s, %s %s (%s%s)", s.Label, p.Conc, p.X, o.XUnit, o.yText(p.Y), o.YUnit, role, tip)))
			lx, ly := labels.place(ax.px(p.X), ay.px(p.Y), label)
			fmt.Fprintf(&b, `<text class="conc-label" x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`, lx, ly, color, label)
		}
		for _, p := range front {
			marker(p, true)
		}
		for _, p := range dominated {
			marker(p, false)
		}
		b.WriteString(`</g>`)
	}

	// Legend under the plot.
	ly := float64(o.Height) - 8
	b.WriteString(`<g class="legend" font-size="13" fill="#111">`)
	for _, s := range series {
		ly += 22
		dash, suffix := "", ""
		if s.Baseline {
			dash, suffix = ` stroke-dasharray="8 5"`, " (baseline)"
		}
		if o.Simulated {
			suffix += " [simulated]"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`, left, ly-4, left+36, ly-4, colors[s.Label], dash)
		fmt.Fprintf(&b, `<text class="legend-entry" x="%.1f" y="%.1f">%s</text>`, left+44, ly, html.EscapeString(s.Label+suffix))
	}
	for _, fa := range alls {
		ly += 22
		dash, text := "", "Pareto frontier across config keys"
		if fa.baseline {
			dash, text = ` stroke-dasharray="12 8"`, text+" (baseline)"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#666" stroke-width="9" stroke-opacity="0.22"%s/>`, left, ly-4, left+36, ly-4, dash)
		fmt.Fprintf(&b, `<text class="legend-frontier" x="%.1f" y="%.1f">%s</text>`, left+44, ly, text)
	}
	if len(o.Bands) > 0 {
		ly += 22
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="36" height="12" fill="#888" fill-opacity="0.15" stroke="#888" stroke-dasharray="3 3"/>`, left, ly-12)
		fmt.Fprintf(&b, `<text class="legend-gap" x="%.1f" y="%.1f">coverage gap (▲ suggested concurrency)</text>`, left+44, ly)
	}
	ly += 22
	fmt.Fprintf(&b, `<text class="legend-note" x="%.1f" y="%.1f" font-size="12" fill="#555">Curves join each config key's Pareto frontier; small faded markers are dominated points.</text>`, left, ly)
	b.WriteString(`</g></svg>`)
	return b.String()
}

// coords lists points as SVG polyline coordinates.
// yText is a y value in a tooltip: throughput to 0.1 tok/s/GPU, a cost
// (joules per token) to 4 significant digits.
func (o ChartOptions) yText(v float64) string {
	if o.YLowerBetter {
		return fmt.Sprintf("%.4g", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// frontier is Frontier with the chart's sense of better: a cost on y
// (YLowerBetter) is ranked by its inverse, which is better higher.
func (o ChartOptions) frontier(pts []XY) (front, dominated []XY) {
	if !o.YLowerBetter {
		return Frontier(pts, o.XLowerBetter)
	}
	inv := func(ps []XY) []XY {
		out := make([]XY, len(ps))
		for i, p := range ps {
			if p.Y > 0 {
				p.Y = 1 / p.Y
			}
			out[i] = p
		}
		return out
	}
	f, d := Frontier(inv(pts), o.XLowerBetter)
	return inv(f), inv(d)
}

func coords(pts []XY, ax, ay axis) string {
	var c []string
	for _, p := range pts {
		c = append(c, fmt.Sprintf("%.1f,%.1f", ax.px(p.X), ay.px(p.Y)))
	}
	return strings.Join(c, " ")
}

// labelPlacer puts each concurrency label next to its marker where it does
// not overlap a label already placed (dense curves put markers close).
type labelPlacer struct{ boxes [][4]float64 }

func (l *labelPlacer) place(x, y float64, text string) (float64, float64) {
	w, h := 6.5*float64(len(text)), 11.0
	// Baseline-left corners to try: above right, below right, above left,
	// below left, then further out.
	tries := [][2]float64{{7, -7}, {7, 15}, {-7 - w, -7}, {-7 - w, 15}, {7, -19}, {7, 27}, {-7 - w, -19}, {-7 - w, 27}}
	for _, t := range tries {
		bx, by := x+t[0], y+t[1]
		box := [4]float64{bx, by - h, bx + w, by}
		if !l.overlaps(box) {
			l.boxes = append(l.boxes, box)
			return bx, by
		}
	}
	bx, by := x+tries[0][0], y+tries[0][1]
	l.boxes = append(l.boxes, [4]float64{bx, by - h, bx + w, by})
	return bx, by
}

func (l *labelPlacer) overlaps(b [4]float64) bool {
	for _, o := range l.boxes {
		if b[0] < o[2] && o[0] < b[2] && b[1] < o[3] && o[1] < b[3] {
			return true
		}
	}
	return false
}
