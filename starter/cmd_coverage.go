package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/results"
)

func init() {
	register("coverage", newCoverageCmd)
}

func runCoverage(args []string, stdout io.Writer) error {
	return execute(nil, newCoverageCmd(), args, stdout, nil)
}

func newCoverageCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "coverage [SWEEP_ID]",
		Short: "find gaps in each curve's median E2EL and interactivity and suggest concurrencies to add",
		Long: `coverage reads a sweep's perf results from the ledger (SWEEP_ID, with --home or
--results DSN as starter report does), or InferenceX agg_bmk.json files
(--results FILE... without SWEEP_ID; a directory means its agg_bmk.json, as
starter export writes it). On each curve it finds neighbouring concurrencies
whose median E2EL (seconds) or median interactivity (tok/s/user) differ by
more than --factor, and suggests the concurrencies that split each gap into
steps within the factor (log(metric) interpolated linearly in log(conc)).

A curve is a config key; agg_bmk rows without one (as InferenceX publishes
them) are grouped as InferenceX's charts draw them: model, hardware,
framework, precision, spec decoding, disagg and scenario (plus ISL/OSL for
fixed-seq-len), across parallelism shapes.

Gaps are advice, not failures: the exit status is 0 whether or not any are
found.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("unexpected argument %q (usage: %s)", args[1], cmd.UseLine())
			}
			return nil
		},
		Annotations: map[string]string{annotationListFlags: "results"},
	}
	fs := c.Flags()
	home := fs.String("home", envOr("SWEEPFLOW_HOME", ".sweepflow"), "local state directory the worker writes (its results.db is the ledger)")
	var inputs []string
	fs.StringArrayVar(&inputs, "results", nil, "with SWEEP_ID: the results store DSN (default $SWEEPFLOW_RESULTS, else <home>/results.db); without: agg_bmk.json files or export directories")
	factor := fs.Float64("factor", curvegaps.DefaultFactor, "largest ratio allowed between neighbouring points (> 1)")
	asJSON := fs.Bool("json", false, `print {"gaps":[...]} instead of a table`)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !(*factor > 1) {
			return usageError("--factor must be above 1, got %v", *factor)
		}
		var curves []curvegaps.Curve
		var warnings []string
		var source string
		switch {
		case len(args) == 1:
			if len(inputs) > 1 {
				return usageError("with SWEEP_ID, --results names one results store (got %d values)", len(inputs))
			}
			lf := ledgerFlags{home: *home, results: os.Getenv("SWEEPFLOW_RESULTS")}
			if len(inputs) == 1 {
				lf.results = inputs[0]
			}
			var err error
			if curves, err = ledgerCurves(cmd.Context(), lf, args[0]); err != nil {
				return err
			}
			source = "sweep " + args[0]
		case len(inputs) > 0:
			for _, p := range inputs {
				rows, err := curvegaps.ReadBmk(p)
				if err != nil {
					return &exitError{code: exitFailure, msg: err.Error() + " (to read a sweep from a results store, give SWEEP_ID before --results)"}
				}
				cs, ws := curvegaps.FromBmk(rows)
				curves = append(curves, cs...)
				for _, w := range ws {
					warnings = append(warnings, p+": "+w)
				}
			}
			curves = mergeCurves(curves)
			source = strings.Join(inputs, ", ")
		default:
			return usageError("give a SWEEP_ID or --results agg_bmk.json... (usage: %s)", cmd.UseLine())
		}
		res, err := curvegaps.Find(curves, *factor)
		if err != nil {
			return usageError("%v", err)
		}
		for _, w := range warnings {
			fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
		}
		out := cmd.OutOrStdout()
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		printCoverage(out, source, curves, res, *factor)
		return nil
	}
	return c
}

// ledgerCurves reads a sweep's perf results: one curve per config key, E2EL
// from the ledger's milliseconds to seconds as agg_bmk has it.
func ledgerCurves(ctx context.Context, lf ledgerFlags, sweepID string) ([]curvegaps.Curve, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if lf.results == "" {
		if _, err := os.Stat(lf.dsn()); err != nil {
			return nil, &exitError{code: exitFailure, msg: fmt.Sprintf("no results store at %s (run a sweep first, or pass --home or --results)", lf.dsn())}
		}
	}
	store, err := results.Open(ctx, lf.dsn())
	if err != nil {
		return nil, err
	}
	defer store.Close()
	perf, err := store.Perf(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	if len(perf) == 0 {
		return nil, &exitError{code: exitFailure, msg: fmt.Sprintf("sweep %q has no perf results in %s", sweepID, lf.where())}
	}
	var col curvegaps.Collector
	for _, p := range perf {
		key := p.ConfigKey
		if key == "" {
			key = "(no config key)"
		}
		col.Add(key, curvegaps.Point{Conc: p.Conc, E2ELSeconds: p.E2ELMedianMs / 1000, Interactivity: p.Interactivity})
	}
	return col.Curves(), nil
}

// mergeCurves joins curves of one key read from several files.
func mergeCurves(cs []curvegaps.Curve) []curvegaps.Curve {
	var col curvegaps.Collector
	for _, c := range cs {
		for _, p := range c.Points {
			col.Add(c.Key, p)
		}
	}
	return col.Curves()
}

func printCoverage(w io.Writer, source string, curves []curvegaps.Curve, res curvegaps.Result, factor float64) {
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
	if metric == curvegaps.MetricE2EL {
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
