package report

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/point"
)

// adaptiveView is one config key's adaptive search in the report.
type adaptiveView struct {
	Request string
	Budget  string
	Added   []addedView
	Deps    []string
	// Charts are the slo searches: per searched deployment, its figure
	// against concurrency with the SLO line and the found concurrency.
	Charts []template.HTML
}

type addedView struct {
	PointID, Topology, Mode, Reason, Served string
	Conc, Seq                               int
}

// addedText says what an added point served: its gap or its SLO.
func addedText(a *point.Added) string {
	switch {
	case a == nil:
		return ""
	case a.Gap != nil:
		return fmt.Sprintf("gap c%d -> c%d of %s (%.3g -> %.3g)", a.Gap.FromConc, a.Gap.ToConc, a.Gap.Metric, a.Gap.From, a.Gap.To)
	case a.SLO != nil:
		return "SLO " + a.SLO.String()
	}
	return a.Reason
}

func adaptiveViews(keys []adaptive.Key, sim bool) []adaptiveView {
	var out []adaptiveView
	for _, k := range keys {
		v := adaptiveView{Request: k.Request.String(),
			Budget: fmt.Sprintf("%d of %d points added, %.2f node-hours", len(k.Added), k.Request.MaxPoints, k.NodeMinutes/60)}
		if k.Request.MaxNodeHours > 0 {
			v.Budget += fmt.Sprintf(" of %g", k.Request.MaxNodeHours)
		}
		for _, a := range k.Added {
			v.Added = append(v.Added, addedView{PointID: a.PointID, Topology: a.Added.Topology, Mode: a.Added.Mode, Reason: a.Added.Reason,
				Served: addedText(&a.Added), Conc: a.Conc, Seq: a.Added.Seq})
		}
		for _, d := range k.Deployments {
			v.Deps = append(v.Deps, d.String())
			if k.Request.Mode == point.AdaptiveSLO && d.Searched && k.Request.SLO != nil {
				v.Charts = append(v.Charts, template.HTML(sloChart(k, d, sim)))
			}
		}
		out = append(out, v)
	}
	return out
}

// sloChart draws an slo search on one deployment: the SLO's figure of each
// of its measured points against concurrency (planned filled, added
// hollow), the SLO as a dashed horizontal line, and the concurrency the
// search found as a vertical line with its goodput.
func sloChart(k adaptive.Key, d adaptive.Deployment, sim bool) string {
	slo := *k.Request.SLO
	type pt struct {
		conc  int
		v     float64
		added bool
	}
	var pts []pt
	for _, p := range k.Points {
		if v, ok := slo.Value(&p.Perf); ok && p.Deployment == d.Key {
			pts = append(pts, pt{p.Conc, v, p.Added})
		}
	}
	slices.SortFunc(pts, func(a, b pt) int { return a.conc - b.conc })
	const w, h, left, right, top, bottom = 720.0, 360.0, 80.0, 24.0, 48.0, 56.0
	var xs, ys []float64
	for _, p := range pts {
		xs, ys = append(xs, float64(p.conc)), append(ys, p.v)
	}
	ys = append(ys, slo.Bound())
	unit := "s"
	if slo.Metric == point.SLOIntvtyMedian {
		unit = "tok/s/user"
	}
	ax := newAxis(xs, left, w-right, "Concurrency", 0)
	ay := newAxis(ys, h-bottom, top, fmt.Sprintf("%s (%s)", slo.Metric, unit), 0)
	id := "slo-" + d.Key[:min(12, len(d.Key))]
	title := fmt.Sprintf("%s on %s: %s", k.Request.ConfigKey, d.Topology, slo)
	if sim {
		title += " — SIMULATED DATA"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="slo-chart" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		html.EscapeString(id), w, h, w, h, html.EscapeString(title))
	b.WriteString(`<rect x="0" y="0" width="100%" height="100%" fill="#ffffff"/>`)
	fmt.Fprintf(&b, `<text x="%.0f" y="24" text-anchor="middle" font-size="14" font-weight="bold" fill="#111">%s</text>`, w/2, html.EscapeString(title))
	b.WriteString(`<g class="grid" stroke="#e3e3e3" stroke-width="1">`)
	for _, t := range ax.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, ax.px(t), top, ax.px(t), h-bottom)
	}
	for _, t := range ay.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, left, ay.px(t), w-right, ay.px(t))
	}
	b.WriteString(`</g><g font-size="11" fill="#333">`)
	for _, t := range ax.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, ax.px(t), h-bottom+16, ax.tickText(t))
	}
	for _, t := range ay.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, left-6, ay.px(t)+4, ay.tickText(t))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (left+w-right)/2, h-12, html.EscapeString(ax.label))
	fmt.Fprintf(&b, `<text x="18" y="%.0f" text-anchor="middle" transform="rotate(-90 18 %.0f)">%s</text>`, (top+h-bottom)/2, (top+h-bottom)/2, html.EscapeString(ay.label))
	b.WriteString(`</g>`)
	// The SLO line.
	y := ay.px(slo.Bound())
	fmt.Fprintf(&b, `<g class="slo-line"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="2" stroke-dasharray="6 4"/><text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#c0392b">SLO %s</text></g>`,
		left, y, w-right, y, w-right-4, y-6, html.EscapeString(slo.String()))
	// The found concurrency.
	if f := d.Found; f != nil && f.Conc > 0 {
		x := ax.px(float64(f.Conc))
		fmt.Fprintf(&b, `<g class="slo-found" data-conc="%d"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2e8b57" stroke-width="2"/><text x="%.1f" y="%.1f" font-size="11" fill="#2e8b57">c%d: goodput %.1f tok/s/GPU</text></g>`,
			f.Conc, x, top, x, h-bottom, x+4, top+12, f.Conc, f.Goodput)
	}
	// The curve and its points.
	var path []string
	for _, p := range pts {
		path = append(path, fmt.Sprintf("%.1f,%.1f", ax.px(float64(p.conc)), ay.px(p.v)))
	}
	if len(path) > 1 {
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#0072B2" stroke-width="1.5"/>`, strings.Join(path, " "))
	}
	for _, p := range pts {
		fill, kind := "#0072B2", "planned"
		if p.added {
			fill, kind = "#ffffff", "added"
		}
		meets := "meets"
		if !slo.Meets(p.v) {
			meets = "misses"
		}
		fmt.Fprintf(&b, `<circle class="slo-point slo-%s" cx="%.1f" cy="%.1f" r="5" fill="%s" stroke="#0072B2" stroke-width="2"><title>c%d (%s): %.4g %s, %s the SLO</title></circle>`,
			kind, ax.px(float64(p.conc)), ay.px(p.v), fill, p.conc, kind, p.v, unit, meets)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
