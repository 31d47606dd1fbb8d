package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

func init() {
	register(command{name: "schedule create", summary: "create a Temporal Schedule that runs a sweep on a cron (e.g. nightly)", run: runScheduleCreate})
	register(command{name: "schedule list", summary: "list sweepflow schedules with their next runs", run: runScheduleList})
	register(command{name: "schedule delete", summary: "delete a schedule (running sweeps go on)", run: runScheduleDelete})
}

func runScheduleCreate(args []string) error {
	fs := flag.NewFlagSet("schedule create", flag.ContinueOnError)
	cron := fs.String("cron", "0 2 * * *", "cron expression")
	tz := fs.String("timezone", "UTC", "IANA time zone of the cron expression")
	sweepFile := fs.String("sweep", "configs/sweeps/dsv4-gb200-agentx.yaml", "sweep file to run")
	clusterFile := fs.String("cluster", "", "cluster profile overriding the sweep file's")
	catchup := fs.Duration("catchup-window", time.Hour, "how late a missed run may still start")
	pause := fs.Bool("pause-on-failure", false, "pause the schedule when a run fails")
	if err := fs.Parse(reorder(args)); err != nil || fs.NArg() != 1 {
		return &exitError{code: 2, msg: "usage: starter schedule create NAME --cron EXPR --timezone TZ --sweep FILE"}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("--timezone %q: %v", *tz, err)}
	}
	name := fs.Arg(0)
	in, _, err := buildSweep(sweepRequest{SweepFile: *sweepFile, ClusterFile: *clusterFile, Nightly: true})
	if err != nil {
		return &exitError{code: 1, msg: oneLine(err)}
	}
	// Each run's workflow ID (the schedule appends the time) is its sweep ID.
	in.SweepID = ""
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:             name,
		Spec:           client.ScheduleSpec{CronExpressions: []string{*cron}, TimeZoneName: *tz},
		Overlap:        enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow:  *catchup,
		PauseOnFailure: *pause,
		Note:           fmt.Sprintf("sweepflow: %s (%d points) on %s", in.Name, len(in.Points), in.Cluster),
		Action: &client.ScheduleWorkflowAction{
			ID:            in.Name + "-" + name,
			Workflow:      workflows.SweepWorkflow,
			Args:          []any{*in},
			TaskQueue:     temporalx.ControlQueue,
			StaticSummary: fmt.Sprintf("%s sweep %s: %d points on %s", name, in.Name, len(in.Points), in.Cluster),
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.SAKind.ValueSet(workflows.KindSweep), workflows.SAPointStatus.ValueSet(workflows.StatusRunning)),
		},
	})
	if err != nil {
		return fmt.Errorf("creating schedule %s: %w", name, err)
	}
	desc, err := h.Describe(ctx)
	if err == nil && len(desc.Info.NextActionTimes) > 0 {
		fmt.Printf("schedule %s created: %q (%s), overlap SKIP; next run %s\n", name, *cron, *tz, desc.Info.NextActionTimes[0].Format(time.RFC3339))
	} else {
		fmt.Printf("schedule %s created: %q (%s), overlap SKIP\n", name, *cron, *tz)
	}
	return nil
}

func runScheduleList(args []string) error {
	fs := flag.NewFlagSet("schedule list", flag.ContinueOnError)
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	if *jsonOut {
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

func runScheduleDelete(args []string) error {
	fs := flag.NewFlagSet("schedule delete", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return &exitError{code: 2, msg: "usage: starter schedule delete NAME"}
	}
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ScheduleClient().GetHandle(ctx, fs.Arg(0)).Delete(ctx); err != nil {
		return fmt.Errorf("deleting schedule %s: %w", fs.Arg(0), err)
	}
	fmt.Printf("schedule %s deleted\n", fs.Arg(0))
	return nil
}
