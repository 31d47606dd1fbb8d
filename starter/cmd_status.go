package main

import (
	"encoding/json"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

func init() {
	register("status", func() *cobra.Command {
		var jsonOut bool
		c := &cobra.Command{Use: "status SWEEP_ID", Short: "show a sweep's points: stage, status, attempt, elapsed, key figures", Args: exactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return runStatus(args[0], jsonOut) }}
		c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
		return c
	})
	register("watch", func() *cobra.Command {
		var o watchOptions
		c := &cobra.Command{Use: "watch SWEEP_ID", Short: "follow a sweep live until it ends", Args: exactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return runWatch(args[0], o) }}
		c.Flags().BoolVar(&o.json, "json", false, "print a JSON line per change")
		c.Flags().DurationVar(&o.interval, "interval", 2*time.Second, "refresh interval")
		return c
	})
	register("retry", decideCmd(workflows.ActionRetry, "operator decision: retry the failed stage of a waiting point (or --sweep: all)"))
	register("skip", decideCmd(workflows.ActionSkip, "operator decision: skip the failed stage of a waiting point, which ends incomplete (or --sweep: all)"))
	register("abort", decideCmd(workflows.ActionAbort, "operator decision: abort a waiting point with teardown (or --sweep: all)"))
	register("hold", decideCmd(workflows.ActionHold, "keep a waiting point's nodes past the node hold while you debug; decide later (or --sweep: all)"))
}

func runStatus(id string, jsonOut bool) error {
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	v, err := control.Collect(ctx, c, id)
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	control.Print(os.Stdout, v)
	return nil
}

type watchOptions struct {
	json     bool
	interval time.Duration
}

func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// watch follows a sweep on stdout until it ends.
func watch(c client.Client, id string, o watchOptions) error {
	return control.Watch{JSON: o.json, TTY: isTTY(os.Stdout), Interval: o.interval}.Watch(c, id, os.Stdout, os.Stderr)
}

func runWatch(id string, o watchOptions) error {
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return watch(c, id, o)
}

// decideCmd builds `starter retry|skip|abort POINT_WORKFLOW_ID... | --sweep SWEEP_ID`.
func decideCmd(action, short string) func() *cobra.Command {
	return func() *cobra.Command {
		var sweep, reason string
		var hold bool
		c := &cobra.Command{Use: action + " {POINT_WORKFLOW_ID... | --sweep SWEEP_ID}", Short: short,
			Args: func(c *cobra.Command, args []string) error {
				if (len(args) == 0) == (sweep == "") {
					return usageError("give point workflow IDs or --sweep SWEEP_ID, not both (usage: %s)", c.UseLine())
				}
				return nil
			},
			RunE: func(_ *cobra.Command, args []string) error {
				return decide(workflows.Decision{Action: action, Reason: reason, Hold: hold}, args, sweep)
			}}
		c.Flags().StringVar(&sweep, "sweep", "", "apply to every point of this sweep that waits for an operator")
		c.Flags().StringVar(&reason, "reason", "", "why (recorded in the point's state)")
		if action == workflows.ActionRetry || action == workflows.ActionSkip {
			c.Flags().BoolVar(&hold, "hold", false, "keep the point's nodes if it waits for an operator again (debugging), instead of releasing them after the node hold")
		}
		return c
	}
}

// decide sends the operator decision to the points ids, or to every
// waiting point of sweep.
func decide(d workflows.Decision, ids []string, sweep string) error {
	ctx, c, done, err := connect(60 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	return control.Decide(ctx, c, d, ids, sweep, os.Stdout)
}
