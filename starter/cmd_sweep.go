package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

func init() {
	register("sweep start", func() *cobra.Command {
		var f startFlags
		c := &cobra.Command{Use: "start", Short: "plan a sweep and start it on Temporal (prints the sweep ID and Web UI link)", Args: noArgs,
			RunE: func(*cobra.Command, []string) error { return runSweepStart(f) }}
		f.bind(c.Flags())
		c.Flags().Var(&f.allow, "allow", "start despite failing `starter check` findings of this rule (repeatable; recorded in the sweep's memo)")
		c.Flags().StringVar(&f.changelog.Path, "changelog", "", "InferenceX perf-changelog.yaml: run the config keys, scenario types and evals its chosen entries select (the --sweep file still names config files, cluster and recipes)")
		c.Flags().IntVar(&f.changelog.Entry, "entry", 0, "with --changelog: run entry N (1-based; negative counts from the end)")
		c.Flags().IntVar(&f.changelog.Since, "since", 0, "with --changelog: run entries N to the last (default: the last entry)")
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
	changelog changelogRef
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

func fastTuning() workflows.Tuning {
	return workflows.Tuning{RetryInterval: time.Second, MaxAttempts: 3, HeartbeatTimeout: 10 * time.Second, OperatorTimeout: 2 * time.Hour}
}

func runSweepStart(f startFlags) error {
	req := sweepRequest{SweepFile: f.sweepFile, ClusterFile: f.clusterFile, ID: f.id, ReuseFrom: f.reuseFrom, Force: f.force, Faults: f.faults}
	if f.fast {
		req.Tuning = fastTuning()
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
	rep, err := reviewSweep(f.sweepFile, f.clusterFile, f.allow, req.Changelog)
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
	f.memo = reviewMemo(rep, f.allow)
	in, p, err := buildSweep(req)
	if err != nil {
		return &exitError{code: 1, msg: oneLine(err)}
	}
	if req.Changelog != nil {
		f.memo["changelog"] = changelogMemo(*req.Changelog)
	}
	if err := recordPlan(f.ledger, in, p); err != nil {
		return err
	}
	c, err := temporalx.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return startAndReport(c, in, f)
}

// recordPlan stores the sweep's plan and the bytes of its input files in
// the ledger, so `starter rerun` needs neither the files nor Temporal
// history. The same plan stored twice (an attaching start) is fine.
func recordPlan(l ledgerFlags, in *workflows.SweepInput, p *plan.Plan) error {
	files, err := planFiles(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := l.openOrCreate(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	return putPlan(ctx, store, in, files)
}

// planFiles reads the bytes of every file the plan read.
func planFiles(p *plan.Plan) ([]results.PlanFile, error) {
	files := make([]results.PlanFile, 0, len(p.Inputs))
	for _, i := range p.Inputs {
		files = append(files, results.PlanFile{Path: i.Path, Role: i.Role})
	}
	return results.ReadPlanFiles(files)
}

// putPlan stores the sweep input as the plan of in.SweepID, with files.
func putPlan(ctx context.Context, store *results.Store, in *workflows.SweepInput, files []results.PlanFile) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return store.PutSweepPlan(ctx, results.SweepPlan{SweepID: in.SweepID, PlanJSON: data, Files: files})
}

// storedPlan reads a sweep's plan from the ledger.
func storedPlan(ctx context.Context, store *results.Store, id string) (*workflows.SweepInput, []results.PlanFile, bool, error) {
	sp, ok, err := store.GetSweepPlan(ctx, id)
	if err != nil || !ok {
		return nil, nil, ok, err
	}
	var in workflows.SweepInput
	if err := json.Unmarshal(sp.PlanJSON, &in); err != nil {
		return nil, nil, false, fmt.Errorf("sweep %s: stored plan: %w", id, err)
	}
	return &in, sp.Files, true, nil
}

func startAndReport(c client.Client, in *workflows.SweepInput, f startFlags) error {
	if f.nodeHold != 0 && f.nodeHold != workflows.DefaultNodeHold {
		in.Tuning.NodeHold = f.nodeHold
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := startSweepMemo(ctx, c, in, f.memo)
	if err != nil {
		return err
	}
	link := sweepLink(f.uiURL, in.SweepID)
	if f.jsonOut && !f.wait {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"sweep_id": in.SweepID, "run_id": run.GetRunID(), "points": len(in.Points), "ui": link})
	}
	if !f.jsonOut {
		fmt.Printf("sweep %s: %d points on cluster %s (%d nodes)\n  run:    %s\n  Web UI: %s\n", in.SweepID, len(in.Points), in.Cluster, in.NodeBudget, run.GetRunID(), link)
	}
	if f.wait {
		return watch(c, in.SweepID, watchOptions{json: f.jsonOut, interval: time.Second})
	}
	return nil
}

// startSweep starts the sweep workflow; a second start of the same ID while
// it runs attaches to it (USE_EXISTING), and a finished one says so.
func startSweep(ctx context.Context, c client.Client, in *workflows.SweepInput) (client.WorkflowRun, error) {
	return startSweepMemo(ctx, c, in, nil)
}

// startSweepMemo starts the sweep with a memo (the review's waivers).
func startSweepMemo(ctx context.Context, c client.Client, in *workflows.SweepInput, memo map[string]any) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		Memo:                     memo,
		ID:                       in.SweepID,
		TaskQueue:                temporalx.ControlQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("sweep %s: %d points on %s (%d nodes)", in.Name, len(in.Points), in.Cluster, in.NodeBudget),
		StaticDetails:            sweepDetails(in),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SAKind.ValueSet(workflows.KindSweep), workflows.SASweepID.ValueSet(in.SweepID),
			workflows.SAPointStatus.ValueSet(workflows.StatusRunning)),
	}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.SweepWorkflow, workflowInput(in))
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil, fmt.Errorf("sweep %s already ran; see `starter status %s`, start a new run with `starter rerun %s`, or pass --id", in.SweepID, in.SweepID, in.SweepID)
	}
	if err != nil {
		return nil, fmt.Errorf("starting sweep %s: %w", in.SweepID, err)
	}
	return run, nil
}

// storedPlanPoints is the plan size from which the sweep workflow loads
// its points from the plan stored in the ledger (both start paths store it
// first) instead of carrying them in its start input: ~2.2 KB per point,
// so a 1,000-point input would pass the server's 2 MiB blob limit. The
// worker must then use the same ledger as starter.
const storedPlanPoints = 300

// workflowInput is the sweep's start input: the points, or for a large
// plan a reference to the stored plan.
func workflowInput(in *workflows.SweepInput) workflows.SweepInput {
	out := *in
	if len(out.Points) >= storedPlanPoints && out.PlanRef == "" {
		out.Points, out.PlanRef = nil, out.SweepID
	}
	return out
}

// detailRows bounds the point table of a sweep's static details.
const detailRows = 100

func sweepDetails(in *workflows.SweepInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**sweep file** %s\n\n| point | topology | conc | nodes |\n|---|---|---|---|\n", in.SweepFile)
	for i, p := range in.Points {
		if i == detailRows {
			fmt.Fprintf(&b, "| ... %d more | | | |\n", len(in.Points)-detailRows)
			break
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", p.PointID, p.Topology, p.Conc, p.Nodes)
	}
	if len(in.ReuseFrom) > 0 {
		fmt.Fprintf(&b, "\n**reuses** %s\n", strings.Join(in.ReuseFrom, ", "))
	}
	return b.String()
}

func sweepLink(ui, sweepID string) string {
	q := url.QueryEscape(fmt.Sprintf(`SweepID="%s"`, sweepID))
	return strings.TrimRight(ui, "/") + "/namespaces/default/workflows?query=" + q
}

func checkStages(force []string) error {
	for _, s := range force {
		if s != "perf" && s != "eval" {
			return &exitError{code: 2, msg: fmt.Sprintf("--force %q: only the durable stages perf and eval can be forced", s)}
		}
	}
	return nil
}

// oneLine keeps the first line of a (possibly multi-error) message.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
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
	// The plan comes from the ledger, so a rerun works once Temporal has
	// dropped the old sweep's history. --sweep or --cluster re-plans from
	// files instead (onto another cluster, or after editing a recipe).
	var in *workflows.SweepInput
	var files []results.PlanFile
	prev, stored, found, err := storedPlan(ctx, store, old)
	if err != nil {
		return err
	}
	replan := setFlag(fs, "sweep") || setFlag(fs, "cluster")
	if !found && !replan {
		// A sweep started before plans were kept: ask Temporal.
		pr, qerr := querySweep(ctx, c, old)
		if qerr != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("sweep %s: no plan in the ledger (%s) and Temporal does not know it either: %v; pass --sweep and --cluster to plan again",
				old, f.ledger.where(), qerr)}
		}
		prev = &workflows.SweepInput{SweepFile: pr.SweepFile, ClusterFile: pr.ClusterFile, ReuseFrom: pr.ReuseFrom}
		replan = true
	}
	reuse := append([]string{old}, prev.ReuseFrom...)
	reuse = append(reuse, f.reuseFrom...)
	if replan {
		sweepFile, clusterFile := prev.SweepFile, prev.ClusterFile
		if setFlag(fs, "sweep") {
			sweepFile = f.sweepFile
		}
		if setFlag(fs, "cluster") {
			clusterFile = f.clusterFile
		}
		req := sweepRequest{SweepFile: sweepFile, ClusterFile: clusterFile, ID: f.id, ReuseFrom: reuse, Force: f.force, Faults: f.faults}
		if f.fast {
			req.Tuning = fastTuning()
		}
		var p *plan.Plan
		if in, p, err = buildSweep(req); err != nil {
			return &exitError{code: 1, msg: oneLine(err)}
		}
		if files, err = planFiles(p); err != nil {
			return err
		}
	} else {
		in, files = prev, stored
		in.ReuseFrom, in.Force, in.Done, in.Runs, in.StartedAt = reuse, f.force, nil, 0, time.Time{}
		in.Tuning = workflows.Tuning{}
		if f.fast {
			in.Tuning = fastTuning()
		}
		for i := range in.Points {
			in.Points[i].Faults = nil
		}
		if err := applyFaults(f.faults, in.Points); err != nil {
			return &exitError{code: 1, msg: oneLine(err)}
		}
		in.SweepID = f.id
	}
	if f.id == "" {
		in.SweepID, err = nextRerunID(ctx, c, old)
		if err != nil {
			return err
		}
	}
	if err := putPlan(ctx, store, in, files); err != nil {
		return err
	}
	store.Close() // not needed while the sweep is watched (idempotent with the defer)
	return startAndReport(c, in, f)
}

// nextRerunID is <base>-rerun<N> with the first N not taken.
func nextRerunID(ctx context.Context, c client.Client, old string) (string, error) {
	base := old
	if i := strings.LastIndex(old, "-rerun"); i > 0 {
		base = old[:i]
	}
	for n := 1; n < 1000; n++ {
		id := fmt.Sprintf("%s-rerun%d", base, n)
		_, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return id, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("too many reruns of %s", base)
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
