package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/report"
)

func init() {
	register("report", newReportCmd)
}

func runReport(args []string) error { return execute(nil, newReportCmd(), args, nil, nil) }

func newReportCmd() *cobra.Command {
	c := &cobra.Command{Use: "report", Short: "write a self-contained HTML report of a sweep (Pareto frontiers, E2EL chart, coverage gaps, regressions vs a baseline)", Args: noArgs}
	fs := c.Flags()
	var lf ledgerFlags
	lf.bind(fs)
	sweep := fs.String("sweep", "", "sweep ID to report (required)")
	baseline := fs.String("baseline", "", "baseline sweep ID: adds the regression table and dashed baseline curves")
	out := fs.String("out", "report.html", "HTML file to write")
	th := regress.DefaultThresholds()
	fs.Float64Var(&th.OutputTputPerGPUDropPct, "max-tput-drop", th.OutputTputPerGPUDropPct, "regression: output throughput per GPU down more than this many percent")
	fs.Float64Var(&th.TTFTp90RisePct, "max-ttft-rise", th.TTFTp90RisePct, "regression: TTFT p90 up more than this many percent")
	fs.Float64Var(&th.InteractivityDropPct, "max-interactivity-drop", th.InteractivityDropPct, "regression: interactivity down more than this many percent")
	fs.Float64Var(th.JoulesPerOutputTokenRisePct, "max-joules-rise", th.JoulesRisePct(), "regression: GPU energy per output token up more than this many percent")
	evalDrop := fs.Float64("max-eval-drop", regress.DefaultEvalDropPts, "regression: GSM8K strict score down more than this many percentage points")
	covFactor := fs.Float64("coverage-factor", curvegaps.DefaultFactor, "coverage: show a gap where neighbouring concurrencies' median E2EL or interactivity differ by more than this factor (as starter coverage --factor)")
	c.RunE = func(*cobra.Command, []string) error {
		if *sweep == "" {
			return &exitError{code: 2, msg: "--sweep ID is required"}
		}
		if !(*covFactor > 1) {
			return &exitError{code: 2, msg: fmt.Sprintf("--coverage-factor must be above 1, got %v", *covFactor)}
		}
		if *baseline == *sweep {
			return &exitError{code: 2, msg: "--baseline must name another sweep"}
		}
		ctx := context.Background()
		store, _, _, err := lf.open(ctx)
		if err != nil {
			return err
		}
		defer store.Close()
		in, err := report.Load(ctx, store, *sweep, *baseline)
		if errors.Is(err, report.ErrNoSweep) {
			return &exitError{code: 1, msg: err.Error()}
		}
		if err != nil {
			return err
		}
		in.Thresholds, in.EvalDropPts, in.CoverageFactor = th, *evalDrop, *covFactor
		if in.Forecast, err = control.ForecastStored(ctx, store, *sweep, forecast.DefaultAssumptions()); err != nil {
			in.ForecastNote = "no forecast: " + err.Error()
		}
		var buf bytes.Buffer
		if err := report.Render(&buf, in); err != nil {
			return err
		}
		if dir := filepath.Dir(*out); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return err
		}
		_, fsn := in.Findings()
		fmt.Printf("wrote %s (%d points, %d perf results", *out, len(in.Current.Points), len(in.Current.Perf))
		if in.Baseline != nil {
			fmt.Printf(", %d regression findings vs %s", len(fsn), *baseline)
		}
		fmt.Println(")")
		if line := in.ForecastLine(); line != "" {
			fmt.Println(line)
		}
		return nil
	}
	return c
}
