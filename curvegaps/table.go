package curvegaps

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/results"
)

// FromPerf is a sweep's perf results from the ledger as curves: one per
// config key, E2EL from the ledger's milliseconds to seconds as agg_bmk
// has it.
func FromPerf(perf []results.PerfResult) []Curve {
	var col Collector
	for _, p := range perf {
		key := p.ConfigKey
		if key == "" {
			key = "(no config key)"
		}
		col.Add(key, Point{Conc: p.Conc, E2ELSeconds: p.E2ELMedianMs / 1000, Interactivity: p.Interactivity})
	}
	return col.Curves()
}

// Merge joins curves of one key read from several files.
func Merge(cs []Curve) []Curve {
	var col Collector
	for _, c := range cs {
		for _, p := range c.Points {
			col.Add(c.Key, p)
		}
	}
	return col.Curves()
}

// WriteTable prints the gaps found on curves read from source as
// `starter coverage` shows them: a summary line, a table of the gaps and
// the concurrencies to add per curve.
func WriteTable(w io.Writer, source string, curves []Curve, res Result, factor float64) {
	n := 0
	for _, c := range curves {
		n += len(c.Points)
	}
	fmt.Fprintf(w, "%s: %d curves, %d points, %d gaps wider than x%g\n", source, len(curves), n, len(res.Gaps), factor)
	if len(res.Gaps) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURVE\tMETRIC\tFROM\tTO\tRATIO\tADD CONC")
	for _, g := range res.Gaps {
		add := "none (no concurrency in between)"
		if len(g.SuggestConc) > 0 {
			add = joinInts(g.SuggestConc)
		}
		fmt.Fprintf(tw, "%s\t%s\tc%d %s\tc%d %s\tx%.1f\t%s\n", g.ConfigKey, g.Metric,
			g.From.Conc, metricText(g.Metric, g.From.Value), g.To.Conc, metricText(g.Metric, g.To.Value), g.Ratio(), add)
	}
	tw.Flush()
	by := res.SuggestByKey()
	if len(by) == 0 {
		return
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "\nconcurrencies to add per curve:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, joinInts(by[k]))
	}
}

func metricText(metric string, v float64) string {
	if metric == MetricE2EL {
		return fmt.Sprintf("%.3g s", v)
	}
	return fmt.Sprintf("%.4g tok/s/user", v)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}
