package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

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
			curves = curvegaps.Merge(curves)
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
		curvegaps.WriteTable(out, source, curves, res, *factor)
		return nil
	}
	return c
}

// ledgerCurves reads a sweep's perf results from the ledger as curves.
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
	return curvegaps.FromPerf(perf), nil
}
