package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/nightly"
)

func init() {
	register("schedule create", func() *cobra.Command {
		var f scheduleFlags
		c := &cobra.Command{Use: "create NAME", Short: "create a nightly regression schedule: run a sweep on a cron, compare with its baseline", Args: exactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return runScheduleCreate(args[0], f) }}
		f.bind(c.Flags())
		return c
	})
	register("schedule list", func() *cobra.Command {
		var jsonOut bool
		c := &cobra.Command{Use: "list", Short: "list sweepflow schedules with their next runs", Args: noArgs,
			RunE: func(*cobra.Command, []string) error { return runScheduleList(jsonOut) }}
		c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
		return c
	})
	register("schedule backfill", func() *cobra.Command {
		var from, to string
		c := &cobra.Command{Use: "backfill NAME", Short: "run a schedule for past nights now (one run per missed action)", Args: exactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				if from == "" || to == "" {
					return usageError("--from and --to are required (usage: %s --from RFC3339 --to RFC3339)", c.UseLine())
				}
				return runScheduleBackfill(args[0], from, to)
			}}
		c.Flags().StringVar(&from, "from", "", "start of the period, RFC 3339 (e.g. 2026-11-28T00:00:00Z)")
		c.Flags().StringVar(&to, "to", "", "end of the period, RFC 3339")
		return c
	})
	register("schedule delete", func() *cobra.Command {
		return &cobra.Command{Use: "delete NAME", Short: "delete a schedule (running sweeps go on)", Args: exactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return runScheduleDelete(args[0]) }}
	})
}

type scheduleFlags struct {
	cron, tz, sweepFile, clusterFile string
	baseline, webhook                string
	catchup, jitter                  time.Duration
	pause, fast, forecast            bool
	gitDir, gitRef                   string
	allow                            multiFlag
}

func (f *scheduleFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.cron, "cron", "0 2 * * *", "cron expression")
	fs.StringVar(&f.tz, "timezone", "UTC", "IANA time zone of the cron expression")
	fs.StringVar(&f.sweepFile, "sweep", "configs/sweeps/dsv4-gb200-agentx.yaml", "sweep file to run (its regression: mapping sets the thresholds)")
	fs.StringVar(&f.clusterFile, "cluster", "", "cluster profile overriding the sweep file's")
	fs.StringVar(&f.baseline, "baseline", "", "pin the baseline to this sweep ID (default: each point's last completed nightly)")
	fs.StringVar(&f.webhook, "webhook", "", "POST a JSON summary of each night to this http(s) URL")
	fs.DurationVar(&f.catchup, "catchup-window", time.Hour, "how late a missed run may still start")
	fs.DurationVar(&f.jitter, "jitter", 0, "random delay added to each run's start")
	fs.BoolVar(&f.pause, "pause-on-failure", false, "pause the schedule when a night fails (the sweep or the comparison could not run)")
	fs.BoolVar(&f.fast, "fast-retries", false, "short retry intervals and operator timeout (demos and tests)")
	fs.StringVar(&f.gitDir, "git-dir", "", "read the sweep's files from this git checkout at --git-ref each night (--sweep and --cluster relative to its root)")
	fs.StringVar(&f.gitRef, "git-ref", "HEAD", "with --git-dir: the ref each night plans from (resolved to a commit every night)")
	fs.Var(&f.allow, "allow", "waive this check rule on every night (repeatable)")
	fs.BoolVar(&f.forecast, "forecast", false, "forecast each night's sweep before it starts and post it to the webhook then (docs/forecast.md)")
}

// nightlySchedule checks the flags and builds the schedule (control).
func nightlySchedule(name string, f scheduleFlags) (client.ScheduleOptions, *nightly.Input, error) {
	if _, err := time.LoadLocation(f.tz); err != nil {
		return client.ScheduleOptions{}, nil, &exitError{code: 2, msg: fmt.Sprintf("--timezone %q: %v", f.tz, err)}
	}
	if f.webhook != "" {
		u, err := url.Parse(f.webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return client.ScheduleOptions{}, nil, &exitError{code: 2, msg: "--webhook must be an http:// or https:// URL"}
		}
	}
	if f.catchup < 10*time.Second {
		return client.ScheduleOptions{}, nil, &exitError{code: 2, msg: "--catchup-window must be at least 10s"}
	}
	for _, a := range f.allow {
		if !checklist.KnownRule(a) {
			return client.ScheduleOptions{}, nil, usageError("--allow %q: unknown rule (see starter check --help)", a)
		}
	}
	return control.NightlySchedule(name, control.Nightly{Cron: f.cron, TimeZone: f.tz, SweepFile: f.sweepFile, ClusterFile: f.clusterFile,
		Baseline: f.baseline, Webhook: f.webhook, Catchup: f.catchup, Jitter: f.jitter, PauseOnFailure: f.pause, Fast: f.fast,
		GitDir: f.gitDir, GitRef: f.gitRef, Allow: f.allow, Forecast: f.forecast})
}

func runScheduleCreate(name string, f scheduleFlags) error {
	opts, nin, err := nightlySchedule(name, f)
	if err != nil {
		return err
	}
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	h, err := c.ScheduleClient().Create(ctx, opts)
	if err != nil {
		return fmt.Errorf("creating schedule %s: %w", name, err)
	}
	th := nin.Thresholds
	fmt.Printf("schedule %s created: %q (%s), overlap SKIP, catch-up %s, pause on failure %v\n", name, f.cron, f.tz, f.catchup, f.pause)
	fmt.Printf("  regression thresholds: output tput/GPU %s, TTFT p90 %s, interactivity %s\n",
		threshold("-", th.OutputTputPerGPUDropPct), threshold("+", th.TTFTp90RisePct), threshold("-", th.InteractivityDropPct))
	if desc, err := h.Describe(ctx); err == nil && len(desc.Info.NextActionTimes) > 0 {
		fmt.Printf("  next run %s\n", desc.Info.NextActionTimes[0].Format(time.RFC3339))
	}
	fmt.Printf("  nights with regressions: SweepflowKind=\"nightly\" AND RegressionCount > 0\n")
	return nil
}

// threshold shows a tolerance: "-5 %", or "off" when negative.
func threshold(sign string, pct float64) string {
	if pct < 0 {
		return "off"
	}
	return fmt.Sprintf("%s%g %%", sign, pct)
}

func runScheduleBackfill(name, from, to string) error {
	start, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("--from: %v", err)}
	}
	end, err := time.Parse(time.RFC3339, to)
	if err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("--to: %v", err)}
	}
	if !end.After(start) {
		return &exitError{code: 2, msg: "--to must be after --from"}
	}
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	// BUFFER_ALL: backfilled nights run one after another, in order, so each
	// compares with the one before it.
	err = c.ScheduleClient().GetHandle(ctx, name).Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{
		{Start: start, End: end, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL}}})
	if err != nil {
		return fmt.Errorf("backfilling schedule %s: %w", name, err)
	}
	fmt.Printf("schedule %s: backfill of %s .. %s requested\n", name, start.Format(time.RFC3339), end.Format(time.RFC3339))
	return nil
}

func runScheduleList(jsonOut bool) error {
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return err
	}
	type row struct {
		ID     string    `json:"id"`
		Note   string    `json:"note"`
		Paused bool      `json:"paused"`
		Next   time.Time `json:"next_run,omitempty"`
	}
	var rows []row
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return err
		}
		r := row{ID: e.ID, Note: e.Note, Paused: e.Paused}
		if len(e.NextActionTimes) > 0 {
			r.Next = e.NextActionTimes[0]
		}
		rows = append(rows, r)
	}
	if jsonOut {
		return json.NewEncoder(os.Stdout).Encode(rows)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tPAUSED\tNEXT RUN\tNOTE\t")
	for _, r := range rows {
		next := "-"
		if !r.Next.IsZero() {
			next = r.Next.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t\n", r.ID, r.Paused, next, r.Note)
	}
	return tw.Flush()
}

func runScheduleDelete(name string) error {
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	if err := c.ScheduleClient().GetHandle(ctx, name).Delete(ctx); err != nil {
		return fmt.Errorf("deleting schedule %s: %w", name, err)
	}
	fmt.Printf("schedule %s deleted\n", name)
	return nil
}
