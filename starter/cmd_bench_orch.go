package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/bench"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/worker/workers"
)

func init() {
	register("bench orchestration", newBenchOrchCmd)
}

// benchOrchestration runs `starter bench orchestration args` in-process.
func benchOrchestration(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, newBenchOrchCmd(), args, stdout, stderr)
}

func newBenchOrchCmd() *cobra.Command {
	var o bench.Orchestration
	c := &cobra.Command{Use: "orchestration", Short: "measure orchestration alone: a sweep of N points on a no-op cluster (points/min, stage transitions, history sizes)",
		Long: orchestrationUsage, Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return usageError("%v", err)
			}
			in, _, err := control.Build(control.Request{SweepFile: o.SweepFile})
			if err == nil && len(in.Points) == 0 {
				err = fmt.Errorf("%s: the plan has no points", o.SweepFile)
			}
			if err != nil {
				return usageError("%s (--sweep names the plan whose points are repeated)", errtext.FirstLine(err))
			}
			o.Template = in.Points
			if o.Address == "" {
				wd, _ := os.Getwd()
				if o.DevServer, o.OwnDevServer, err = devServerBinary(wd, o.Stock); err != nil {
					return err
				}
			}
			return o.Run(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}}
	bindOrchestrationFlags(c.Flags(), &o)
	return c
}

// orchestrationUsage is the help text of `starter bench orchestration`.
const orchestrationUsage = `usage: starter bench orchestration --points N [--address HOST:PORT] [--runs 3] [--json]

Measures sweepflow's orchestration alone: a sweep of N points runs the real
sweep and point workflows on a no-op cluster (package cluster/noop): every
stage returns at once, so the time is Temporal's and the worker's. The
worker runs in this process on a task queue of its own; the points repeat
the plan of --sweep (IDs made unique, one node each, --parallel in flight).

Without --address the embedded dev server is started in a temporary
directory (sweepflow-devserver, as "starter server start" does, with its
tuned SQLite and dynamic config; --stock-server: the Temporal CLI's own,
with its defaults) and removed
after: a fresh one for each run, so the runs are independent samples, or
one for all runs with --same-server (later runs then meet the earlier
runs' histories and pending timers, and are slower). With --address the
sweep runs on that server (TEMPORAL_NAMESPACE and TEMPORAL_TLS_* as for
every starter command).

Figures, from the workflow histories, as medians of --runs:
  points/min               N over the sweep's first start to its last close
                           (each point runs 7 stage activities, plus
                           teardown and its ledger record)
  transition p50/p99       one activity's completion to the next one's
                           start in the same point
  history events           per point (max, p50) and per sweep parent run
  continue-as-new          how often the sweep parent continued as new
  activity input bytes     payload bytes of each scheduled activity (max,
                           p50), and how many of them are the matrix row
Exit status: 0 ok (goals are reported, not enforced), 1 error, 2 usage.`

// bindOrchestrationFlags adds the command's flags, with their defaults, to fs.
func bindOrchestrationFlags(fs *flag.FlagSet, o *bench.Orchestration) {
	fs.IntVar(&o.Points, "points", 0, "points in the sweep (required)")
	fs.IntVar(&o.Runs, "runs", 3, "sweeps to run; figures are their medians")
	fs.IntVar(&o.Parallel, "parallel", 64, "points in flight (the sweep's node budget; every point takes one node)")
	fs.IntVar(&o.Pollers, "pollers", workers.DefaultPollers, "workflow-task and activity-task pollers of the in-process worker")
	fs.StringVar(&o.Address, "address", "", "Temporal frontend HOST:PORT (default: start the embedded dev server in a temporary directory)")
	fs.StringVar(&o.SweepFile, "sweep", "configs/sweeps/dsv4-gb200-agentx.yaml", "sweep file whose planned points are repeated (their row JSON sizes the inputs)")
	fs.BoolVar(&o.SameServer, "same-server", false, "run every sweep on one embedded dev server (each run then meets the earlier runs' data); default: a fresh embedded server for each run")
	fs.BoolVar(&o.Stock, "stock-server", false, "start the embedded dev server with the CLI's defaults instead of sweepflow's tuning")
	fs.BoolVar(&o.Eager, "eager", true, "serve workflows and activities on one task queue, so the server hands new activity tasks straight back (eager activity execution); false: two queues, as a control worker and a cluster worker")
	fs.IntVar(&o.PerDeployment, "per-deployment", 1, "points sharing one deployment (one allocation and bring-up, a deployment workflow); 1: every point on its own, the 7-stage flow")
	fs.IntVar(&o.HistoryLimit, "history-limit", 0, "sweep history length at which the parent continues as new (0: the workflow's default, 8000)")
	fs.BoolVar(&o.Gzip, "gzip", false, "gzip the gRPC requests (the SDK's default; off by default here, as it costs both sides CPU on a local server)")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on each sweep")
	fs.BoolVar(&o.JSON, "json", false, "print the figures as JSON")
	fs.StringArrayVar(&o.DynamicConfig, "dynamic-config-value", nil, "KEY=JSON-VALUE added to the embedded dev server's dynamic config (repeatable; experiments)")
	fs.StringArrayVar(&o.Pragmas, "sqlite-pragma", nil, "PRAGMA=VALUE added to the embedded dev server's SQLite settings (repeatable; experiments)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of this process (worker and analysis) here")
}
