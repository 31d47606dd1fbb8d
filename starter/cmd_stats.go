package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/accounting"
)

func init() {
	register("stats", newStatsCmd)
}

func runStats(args []string, stdout io.Writer) error {
	return execute(nil, newStatsCmd(), args, stdout, nil)
}

func newStatsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "stats",
		Short: "where the node-hours went: node-minutes by stage, operator hold and failure class, the useful fraction, queue wait and bring-up times",
		Long: `stats books every allocation's node-minutes in the ledger to one category
(staging, bring-up, warmup, perf, eval restart, eval, teardown, held for an
operator, or failed attempts by failure class) and prints the totals, the
useful fraction (perf and eval node-minutes that ended in a stored figure,
out of all), reused outputs as saved, queue wait and bring-up p50/p90 per
cluster and deployment, and failure classes ranked by node-minutes lost.
How each minute is booked: docs/results.md.`,
		Args: noArgs,
	}
	fs := c.Flags()
	var lf ledgerFlags
	lf.bind(fs)
	var f accounting.Filter
	fs.StringVar(&f.Sweep, "sweep", "", "one sweep ID (default: every sweep in the ledger)")
	fs.StringVar(&f.Cluster, "cluster", "", "only sweeps planned for this cluster profile (its file name without .yaml, e.g. local-sim)")
	fs.StringVar(&f.ConfigKey, "config-key", "", "only points of this config key")
	since := fs.String("since", "", "only sweeps started since: RFC 3339 time, date (2026-12-01) or duration back from now (168h, 7d)")
	asJSON := fs.Bool("json", false, "print the figures as JSON (total_node_minutes, categories, useful_fraction, failure_classes, ...)")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if f.Since, err = accounting.ParseSince(*since, time.Now()); err != nil {
			return usageError("%v", err)
		}
		ctx := context.Background()
		store, _, warnings, err := lf.open(ctx)
		if err != nil {
			return err
		}
		defer store.Close()
		_ = warnings // stats reads only the ledger
		ps, sweeps, err := accounting.Load(ctx, store, f)
		if errors.Is(err, accounting.ErrNoSweep) {
			return &exitError{code: 1, msg: err.Error()}
		}
		if err != nil {
			return err
		}
		sum := accounting.Summarize(accounting.Book(ps, time.Now()), sweeps)
		en, err := accounting.LoadEnergy(ctx, store, sweeps, f.ConfigKey)
		if err != nil {
			return err
		}
		sum.Energy = &en
		if *asJSON {
			return sum.WriteJSON(cmd.OutOrStdout())
		}
		if len(sweeps) == 0 {
			fmt.Fprintln(os.Stderr, "no sweep in the ledger matches")
		}
		return sum.WriteText(cmd.OutOrStdout())
	}
	return c
}
