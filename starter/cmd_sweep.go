package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

func init() {
	register("sweep start", func() *cobra.Command {
		var f startFlags
		c := &cobra.Command{Use: "start", Short: "plan a sweep and start it on Temporal (prints the sweep ID and Web UI link)", Args: noArgs,
			Annotations: map[string]string{annotationListFlags: "config-keys"},
			RunE:        func(*cobra.Command, []string) error { return runSweepStart(f) }}
		f.bind(c.Flags())
		c.Flags().Var(&f.allow, "allow", "start despite failing `starter check` findings of this rule (repeatable; recorded in the sweep's memo)")
		c.Flags().StringVar(&f.changelog.Path, "changelog", "", "InferenceX perf-changelog.yaml: run the config keys, scenario types and evals its chosen entries select (the --sweep file still names config files, cluster and recipes)")
		c.Flags().IntVar(&f.changelog.Entry, "entry", 0, "with --changelog: run entry N (1-based; negative counts from the end)")
		c.Flags().IntVar(&f.changelog.Since, "since", 0, "with --changelog: run entries N to the last (default: the last entry)")
		c.Flags().BoolVar(&f.canary, "canary", false, "run each image and backend's cheapest point (node-hours) first; its other points start once it completed, and end not-started if it failed")
		f.recipes.bind(c.Flags())
		c.Flags().Var(&f.configKeys, "config-keys", "config keys or globs, in place of the sweep file's; several may follow the flag")
		c.Flags().BoolVar(&f.onePointPerKey, "one-point-per-key", false, "one point per config key: its lowest concurrency (with the key's eval, if it has one); a bring-up of every key")
		c.Flags().StringArrayVar(&f.adaptive, "adaptive", nil, "adaptive points for a config key, as the sweep file's adaptive: entry (repeatable; replaces the file's entry for that key): "+
			"KEY=fill[,factor=2][,max-points=3][,max-node-hours=H] or KEY=slo,metric=p99_ttft,max=2,step=64[,grid-min=N][,grid-max=N][,topology=T][,max-points=N][,max-node-hours=H]")
		f.chaos.bind(c.Flags())
		f.sets.bind(c.Flags(), "every recipe of the sweep")
		return c
	})
	register("rerun", func() *cobra.Command {
		var f startFlags
		c := &cobra.Command{Use: "rerun SWEEP_ID", Short: "start a new run of a sweep (plan from the ledger) that reuses every stage output whose identity and profile match", Args: exactArgs(1),
			RunE: func(c *cobra.Command, args []string) error { return runRerun(c.Flags(), f, args[0]) }}
		f.bind(c.Flags())
		return c
	})
	register("cancel", func() *cobra.Command {
		return &cobra.Command{Use: "cancel SWEEP_ID", Short: "cancel a sweep (running points tear down)", Args: exactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return runCancel(args[0]) }}
	})
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, strings.Split(v, ",")...); return nil }
func (m *multiFlag) Type() string       { return "strings" }

type startFlags struct {
	ledger                     ledgerFlags
	sweepFile, clusterFile, id string
	reuseFrom, force, faults   multiFlag
	uiURL                      string
	fast                       bool
	wait, jsonOut              bool
	nodeHold                   time.Duration
	// allow waives check rules; memo records the check on the workflow.
	allow multiFlag
	memo  map[string]any
	// changelog: `sweep start --changelog F [--entry N|--since N]`.
	changelog control.ChangelogRef
	// canary: `sweep start --canary`.
	canary bool
	// recipes and onePointPerKey: `sweep start --inferencex DIR
	// --srt-slurm DIR --one-point-per-key`.
	recipes        recipesFlags
	onePointPerKey bool
	// adaptive: `sweep start --adaptive KEY=MODE,...`.
	adaptive []string
	// chaos: `sweep start --chaos SEED` (starter/chaos.go).
	chaos chaosFlags
	// sets: `sweep start --set dotted.key=value`.
	sets recipeSets
	// configKeys: `sweep start --config-keys` (in place of the file's).
	configKeys listFlag
}

func (f *startFlags) bind(fs *flag.FlagSet) {
	f.ledger.bind(fs)
	fs.StringVar(&f.sweepFile, "sweep", "configs/sweeps/dsv4-gb200-agentx.yaml", "sweep file (config files, keys, cluster profile)")
	fs.StringVar(&f.clusterFile, "cluster", "", "cluster profile overriding the sweep file's")
	fs.StringVar(&f.id, "id", "", "sweep ID (default: the sweep name plus a hash of the plan)")
	fs.Var(&f.reuseFrom, "reuse-from", "reuse durable stage outputs of this earlier sweep when point identity and measurement profile match (repeatable)")
	fs.Var(&f.force, "force", "rerun this stage even when a reusable output exists: perf or eval (repeatable)")
	fs.Var(&f.faults, "inject-fault", "make POINT:STAGE[:TIMES] fail on purpose (chaos testing, operator-gate demos)")
	fs.StringVar(&f.uiURL, "ui", envOr("SWEEPFLOW_UI_URL", "http://127.0.0.1:8233"), "Temporal Web UI base URL for links")
	fs.BoolVar(&f.fast, "fast-retries", false, "short retry intervals and operator timeout (demos and tests)")
	fs.DurationVar(&f.nodeHold, "node-hold", workflows.DefaultNodeHold, "how long a point waiting for an operator keeps its nodes before releasing them (negative: for the whole wait)")
	fs.BoolVar(&f.wait, "wait", false, "watch the sweep until it ends")
	fs.BoolVar(&f.jsonOut, "json", false, "print JSON")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// connect dials Temporal (TEMPORAL_ADDRESS etc., or the embedded server) and
// gives the command a deadline; done closes both.
func connect(timeout time.Duration) (context.Context, client.Client, func(), error) {
	c, err := temporalx.Dial(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return ctx, c, func() { cancel(); c.Close() }, nil
}

func runSweepStart(f startFlags) error {
	root, err := f.recipes.resolve()
	if err != nil {
		return err
	}
	if f.onePointPerKey && f.changelog.Path != "" {
		return usageError("--one-point-per-key plans the sweep file's keys; drop --changelog")
	}
	if err := f.sets.check(); err != nil {
		return err
	}
	req := control.Request{SweepFile: f.sweepFile, ClusterFile: f.clusterFile, ID: f.id, ReuseFrom: f.reuseFrom, Force: f.force, Faults: f.faults,
		Canary: f.canary, RecipesRoot: root, OnePointPerKey: f.onePointPerKey, RecipeSets: f.sets, ConfigKeys: f.configKeys}
	for _, a := range f.adaptive {
		ar, err := point.ParseAdaptive(a)
		if err != nil {
			return usageError("%v", err)
		}
		req.Adaptive = append(req.Adaptive, ar)
	}
	if f.fast {
		req.Tuning = control.FastTuning()
	}
	if err := checkStages(f.force); err != nil {
		return err
	}
	if f.changelog.Path != "" {
		req.Changelog = &f.changelog
	} else if f.changelog.Entry != 0 || f.changelog.Since != 0 {
		return usageError("--entry and --since need --changelog")
	}
	if f.changelog.Entry != 0 && f.changelog.Since != 0 {
		return usageError("--entry and --since are mutually exclusive")
	}
	// The reviewer checklist runs before anything is planned or scheduled.
	rep, err := reviewSweep(f.sweepFile, f.clusterFile, root, f.configKeys, f.allow, req.Changelog)
	if err != nil {
		return err
	}
	if n := rep.Failures(); n > 0 {
		var first string
		for _, fd := range rep.Findings {
			if !fd.Allowed {
				fmt.Fprintln(os.Stderr, fd.String())
				if first == "" {
					first = fd.String()
				}
			}
		}
		return &exitError{code: exitFailure, msg: fmt.Sprintf("refusing to start: %d check failure(s), first: %s; fix them or pass --allow RULE", n, first)}
	}
	f.memo = control.ReviewMemo(rep, f.allow)
	in, p, err := control.Build(req)
	if err != nil {
		return &exitError{code: 1, msg: errtext.FirstLine(err)}
	}
	if req.Changelog != nil {
		f.memo["changelog"] = control.ChangelogMemo(*req.Changelog)
	}
	var chaosRun *chaosRun
	if f.chaos.on() {
		if chaosRun, err = f.chaos.prepare(in, p.Cluster, f.id == ""); err != nil {
			return err
		}
		f.memo["chaos"] = chaosRun.memo()
	}
	if err := recordPlan(f.ledger, in, p); err != nil {
		return err
	}
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if chaosRun == nil {
		return startAndReport(c, in, f)
	}
	return chaosRun.run(c, in, f)
}

// recordPlan stores the sweep's plan and input files in the ledger, so
// `starter rerun` needs neither the files nor Temporal history.
func recordPlan(l ledgerFlags, in *workflows.SweepInput, p *plan.Plan) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := l.openOrCreate(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	return control.RecordPlan(ctx, store, in, p)
}

func startAndReport(c client.Client, in *workflows.SweepInput, f startFlags) error {
	run, err := start(c, in, f)
	if err != nil {
		return err
	}
	link := control.Link(f.uiURL, in.SweepID)
	if f.jsonOut && !f.wait {
		res := map[string]any{"sweep_id": in.SweepID, "run_id": run.GetRunID(), "points": len(in.Points), "ui": link}
		if len(in.Canaries) > 0 {
			res["canaries"] = in.Canaries
		}
		if len(in.Adaptive) > 0 {
			res["adaptive"] = in.Adaptive
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	if !f.jsonOut {
		fmt.Printf("sweep %s: %d points on cluster %s (%d nodes)\n  run:    %s\n  Web UI: %s\n", in.SweepID, len(in.Points), in.Cluster, in.NodeBudget, run.GetRunID(), link)
		control.PrintCanaries(os.Stdout, in.Canaries)
		for _, a := range in.Adaptive {
			fmt.Printf("  adaptive: %s\n", a)
		}
	}
	if f.wait {
		return watch(c, in.SweepID, watchOptions{json: f.jsonOut, interval: time.Second})
	}
	return nil
}

// start starts the sweep workflow with the flags' node hold and memo.
func start(c client.Client, in *workflows.SweepInput, f startFlags) (client.WorkflowRun, error) {
	if f.nodeHold != 0 && f.nodeHold != workflows.DefaultNodeHold {
		in.Tuning.NodeHold = f.nodeHold
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return control.StartMemo(ctx, c, in, f.memo)
}

func checkStages(force []string) error {
	for _, s := range force {
		if s != "perf" && s != "eval" {
			return &exitError{code: 2, msg: fmt.Sprintf("--force %q: only the durable stages perf and eval can be forced", s)}
		}
	}
	return nil
}

func runRerun(fs *flag.FlagSet, f startFlags, old string) error {
	if err := checkStages(f.force); err != nil {
		return err
	}
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	// One ledger handle reads the old plan and records the new one.
	store, err := f.ledger.openOrCreate(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	r := control.Rerun{ID: f.id, ReuseFrom: f.reuseFrom, Force: f.force, Faults: f.faults, Ledger: f.ledger.where()}
	// --sweep or --cluster re-plans from files instead of the stored plan.
	if setFlag(fs, "sweep") {
		r.SweepFile = f.sweepFile
	}
	if setFlag(fs, "cluster") {
		r.ClusterFile = f.clusterFile
	}
	if f.fast {
		r.Tuning = control.FastTuning()
	}
	in, files, err := control.RerunInput(ctx, c, store, old, r)
	if err != nil {
		return err
	}
	if err := control.PutPlan(ctx, store, in, files); err != nil {
		return err
	}
	store.Close() // not needed while the sweep is watched (idempotent with the defer)
	return startAndReport(c, in, f)
}

func setFlag(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}

func runCancel(id string) error {
	ctx, c, done, err := connect(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		return fmt.Errorf("cancelling %s: %w", id, err)
	}
	fmt.Printf("cancel requested for %s: running points tear down and the sweep ends\n", id)
	return nil
}
