package report

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/sweepflow/sweepflow/accounting"
)

// nodeHoursView is the "Where the node-hours went" section: what
// `starter stats --sweep` prints, as a chart and two tables.
type nodeHoursView struct {
	Chart    template.HTML
	Headline string
	Classes  []accounting.ClassSummary
	Timings  []accounting.TimingSummary
	Notes    []string
}

func buildNodeHours(s *accounting.Summary) *nodeHoursView {
	if s == nil || s.TotalNodeMinutes == 0 {
		return nil
	}
	v := &nodeHoursView{Chart: template.HTML(nodeHoursChart(*s)), Classes: s.FailureClasses, Timings: s.Timings, Notes: s.Notes}
	v.Headline = fmt.Sprintf("%.1f node-minutes (%.2f node-hours) in %d allocations; useful fraction %.1f %% (perf and eval that ended in a stored figure)",
		s.TotalNodeMinutes, s.TotalNodeMinutes/60, s.Allocations, 100*s.UsefulFraction)
	if s.Saved.Stages > 0 {
		v.Headline += fmt.Sprintf("; %d reused stages saved %.1f node-minutes", s.Saved.Stages, s.Saved.NodeMinutes)
		if s.Saved.Unknown > 0 {
			v.Headline += fmt.Sprintf(" (%d of unknown cost)", s.Saved.Unknown)
		}
	}
	return v
}

// categoryColour: perf and eval green (what a figure is made of), adaptive
// points a lighter green, setting up blue, the operator hold amber, failed
// attempts red.
func categoryColour(c string) string {
	switch {
	case c == accounting.Perf || c == accounting.Eval:
		return "#2e8b57"
	case c == accounting.Adaptive:
		return "#7cc49a"
	case c == accounting.Held:
		return "#e0a100"
	case strings.HasPrefix(c, accounting.FailedPrefix):
		return "#c0392b"
	case c == accounting.Staging:
		return "#8fb3e0"
	case c == accounting.BringUp:
		return "#4a78b5"
	case c == accounting.Warmup:
		return "#6d96cc"
	case c == accounting.EvalRestart:
		return "#2f5d99"
	}
	return "#9aa5b1" // teardown
}

// nodeHoursChart draws one stacked bar of all node-minutes by category and,
// under it, one bar per category with its node-minutes and share.
func nodeHoursChart(s accounting.Summary) string {
	const w, left, barW, rowH, top = 760.0, 190.0, 400.0, 24.0, 70.0
	var cats []string
	for _, c := range s.CategoryOrder {
		if s.Categories[c] > 0 {
			cats = append(cats, c)
		}
	}
	h := top + rowH*float64(len(cats)) + 16
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="node-hours-chart" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12" role="img">`, w, h, w, h)
	fmt.Fprintf(&b, `<title>Where the node-hours went: %.1f node-minutes</title>`, s.TotalNodeMinutes)
	fmt.Fprintf(&b, `<text x="0" y="16" font-weight="bold" font-size="14">All %.1f node-minutes, by category</text>`, s.TotalNodeMinutes)
	x := 0.0
	for _, c := range cats {
		cw := (w - 2) * s.Categories[c] / s.TotalNodeMinutes
		fmt.Fprintf(&b, `<rect class="nh-stack" data-category="%s" x="%.2f" y="26" width="%.2f" height="22" fill="%s" stroke="#fff" stroke-width="1"><title>%s: %.1f node-min (%.1f %%)</title></rect>`,
			template.HTMLEscapeString(c), x, cw, categoryColour(c), template.HTMLEscapeString(c), s.Categories[c], 100*s.Categories[c]/s.TotalNodeMinutes)
		if cw > 70 {
			fmt.Fprintf(&b, `<text x="%.2f" y="41" fill="#fff" pointer-events="none">%s</text>`, x+5, template.HTMLEscapeString(c))
		}
		x += cw
	}
	maxV := 0.0
	for _, c := range cats {
		maxV = max(maxV, s.Categories[c])
	}
	for i, c := range cats {
		y := top + rowH*float64(i)
		v := s.Categories[c]
		bw := barW * v / maxV
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-8, y+14, template.HTMLEscapeString(c))
		fmt.Fprintf(&b, `<rect class="nh-bar" data-category="%s" data-node-minutes="%.3f" x="%.0f" y="%.1f" width="%.2f" height="16" fill="%s"/>`,
			template.HTMLEscapeString(c), v, left, y+2, max(bw, 1), categoryColour(c))
		fmt.Fprintf(&b, `<text x="%.2f" y="%.1f">%.1f node-min · %.1f %%</text>`, left+max(bw, 1)+6, y+14, v, 100*v/s.TotalNodeMinutes)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
