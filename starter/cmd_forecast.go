package main

import (
	"context"
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/forecast"
)

func init() { register("forecast", newForecastCmd) }

func newForecastCmd() *cobra.Command {
	c := &cobra.Command{Use: "forecast", Short: "node-hours, GPU-hours and makespan of a sweep before it is submitted, from the real sweep workflow in virtual time",
		Long: `Forecasts what a sweep costs and how long it takes on each cluster, before
anything is submitted: points, deployments, bring-ups and eval restarts;
node-hours and GPU-hours by stage; the makespan on the cluster's node budget
with the critical path that decides it; the lower bound max(longest
deployment, node-hours / nodes) and the makespan's ratio to it. Keys no
profile serves, keys that do not plan or fail starter check, and recipes the
launcher refuses are listed with their reason: they cost nothing.

The makespan comes from the real SweepWorkflow and DeploymentWorkflow, run
in Temporal's time-skipping test environment with every stage taking its
forecast time (docs/forecast.md).

usage:
  starter forecast --sweep FILE [--cluster PROFILE]... [--json]
  starter forecast --sweep FILE --changelog perf-changelog.yaml [--entry N|--since N] [--cluster PROFILE]...
  starter forecast --config-files F... --runner-config R --config-keys GLOB... --recipes-root DIR
                   --cluster PROFILE [--cluster PROFILE]...

Each key runs on the first --cluster whose runners: list serves its runner.
Stage times: perf from each row's duration (--perf when it has none), bring-up
from the profile's bring-up-time (the recipe's health_check budget bounds it),
warmup, eval, queue wait, checkpoint staging and teardown from the flags
below; --from-ledger replaces them by the medians the ledger measured for the
same deployments. The output says where each figure came from.

Each cluster's forecast also runs the sweep as "sweep start --canary" would
(each image and backend's cheapest point first, on an allocation of its
own) and says what the canaries add in node-hours and bring-ups, how much
later the sweep ends, and what each failed canary would save; --canary makes
that sweep the headline.`,
		Annotations: map[string]string{annotationListFlags: "config-files,config-keys"},
		Args:        noArgs}
	var f planFlags
	var clusters multiFlag
	var lf ledgerFlags
	var fromLedger, canary bool
	a := forecast.DefaultAssumptions()
	fs := c.Flags()
	fs.StringVar(&f.sweep, "sweep", "", "sweep file (configs/sweeps/*.yaml)")
	fs.Var(&clusters, "cluster", "cluster profile (repeatable); default: the sweep's")
	f.recipes.bind(fs)
	fs.Var(&f.configFiles, "config-files", "master config files (InferenceX format); several may follow the flag")
	fs.StringVar(&f.runnerConfig, "runner-config", "", "runners file (default configs/runners.yaml without --sweep)")
	fs.Var(&f.configKeys, "config-keys", "config keys or globs; several may follow the flag")
	fs.BoolVar(&f.noEvals, "no-evals", false, "no evals")
	fs.BoolVar(&f.onePointPerKey, "one-point-per-key", false, "one point per config key, as `sweep start --one-point-per-key` runs it")
	fs.StringVar(&f.changelog.Path, "changelog", "", "forecast the keys, scenario types and evals of perf-changelog entries")
	fs.IntVar(&f.changelog.Entry, "entry", 0, "with --changelog: entry N (1-based; negative counts from the end)")
	fs.IntVar(&f.changelog.Since, "since", 0, "with --changelog: entries N to the last (default: the last entry)")
	fs.DurationVar(&a.Warmup, "warmup", a.Warmup, "warmup per point (assumed)")
	fs.DurationVar(&a.Eval, "eval", a.Eval, "one GSM8K eval (assumed)")
	fs.DurationVar(&a.Perf, "perf", a.Perf, "perf time of a point whose row has no duration (assumed)")
	fs.DurationVar(&a.QueueWait, "queue-wait", a.QueueWait, "wait for an allocation before its nodes are held (assumed; no node-hours; default 0s)")
	fs.DurationVar(&a.Checkpoint, "checkpoint", a.Checkpoint, "checkpoint staging before bring-up (assumed; counted as bring-up; default 0s)")
	fs.DurationVar(&a.Teardown, "teardown", a.Teardown, "teardown per allocation (assumed; default 0s)")
	fs.BoolVar(&fromLedger, "from-ledger", false, "replace assumed stage times by those the ledger measured for the same deployments")
	fs.BoolVar(&canary, "canary", false, "headline the sweep with canaries (sweep start --canary); without it, a line compares them")
	lf.bind(fs)
	fs.BoolVar(&f.jsonOut, "json", false, "JSON for machines")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if f.changelog.Path == "" && (f.changelog.Entry != 0 || f.changelog.Since != 0) {
			return usageError("--entry and --since need --changelog")
		}
		if f.changelog.Entry != 0 && f.changelog.Since != 0 {
			return usageError("--entry and --since are mutually exclusive")
		}
		if err := a.Validate(); err != nil {
			return usageError("%v", err)
		}
		s, err := sweepFromFlags(&f)
		if err != nil {
			return err
		}
		ctx := context.Background()
		root, err := f.recipes.resolve()
		if err != nil {
			return err
		}
		req := control.ForecastRequest{Sweep: s, Clusters: clusters, RecipesRoot: root, Assumptions: a, Canary: canary, OnePointPerKey: f.onePointPerKey}
		if f.changelog.Path != "" {
			req.Changelog = &f.changelog
		}
		if fromLedger {
			store, _, _, err := lf.open(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			req.Ledger = store
		}
		rep, err := control.Forecast(ctx, req)
		if err != nil {
			return configError(err)
		}
		out := c.OutOrStdout()
		if f.jsonOut {
			enc := json.NewEncoder(out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		return rep.Write(out)
	}
	return c
}
