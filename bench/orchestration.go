package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster/noop"
	"github.com/sweepflow/sweepflow/internal/freeport"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/worker/workers"
	"github.com/sweepflow/sweepflow/workflows"
)

// Goals of issue 14 for 1,000 points on the embedded dev server.
const (
	orchGoalPointsPerMin  = 700
	orchGoalTransitionP50 = 50 // ms
	orchGoalHistoryEvents = 10000
	orchGoalInputBytes    = 4096
)

// OrchestrationUsage is the help text of `starter bench orchestration`.
const OrchestrationUsage = `usage: starter bench orchestration --points N [--address HOST:PORT] [--runs 3] [--json]

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

// Orchestration measures sweepflow's orchestration alone: the flags of
// `starter bench orchestration`, plus what the command resolves before Run.
type Orchestration struct {
	Points, Runs, Parallel, Pollers int
	HistoryLimit, PerDeployment     int
	Address, SweepFile, CPUProfile  string
	DynamicConfig, Pragmas          []string
	JSON, Stock, Eager, Gzip        bool
	SameServer                      bool
	Timeout                         time.Duration

	// Template is the planned points of SweepFile, repeated to Points.
	Template []point.Spec
	// DevServer is the embedded dev server binary (without Address), and
	// OwnDevServer whether it is sweepflow's build.
	DevServer    string
	OwnDevServer bool
}

// RegisterFlags adds the command's flags, with their defaults, to fs.
func (o *Orchestration) RegisterFlags(fs *flag.FlagSet) {
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

// Validate reports a flag value the harness cannot run with.
func (o *Orchestration) Validate() error {
	switch {
	case o.Points <= 0:
		return errors.New("--points is required and must be positive")
	case o.Runs <= 0:
		return fmt.Errorf("--runs must be positive, got %d", o.Runs)
	case o.Parallel <= 0:
		return fmt.Errorf("--parallel must be positive, got %d", o.Parallel)
	case o.PerDeployment <= 0:
		return fmt.Errorf("--per-deployment must be positive, got %d", o.PerDeployment)
	case o.HistoryLimit < 0:
		return fmt.Errorf("--history-limit must not be negative, got %d", o.HistoryLimit)
	case o.Pollers < 2:
		return fmt.Errorf("--pollers must be at least 2 (the SDK alternates sticky and normal polls), got %d", o.Pollers)
	}
	return nil
}

// OrchestrationRun is one measured sweep.
type OrchestrationRun struct {
	SweepID          string  `json:"sweep_id"`
	Points           int     `json:"points"`
	Completed        int     `json:"completed"`
	WallS            float64 `json:"wall_s"`
	PointsPerMin     float64 `json:"points_per_min"`
	ActivitiesPerMin float64 `json:"activities_per_min"`
	Activities       int     `json:"activities"`
	Transitions      int     `json:"transitions"`
	// EvalTurnWaits are the waits of points whose eval waits for their
	// deployment's eval phase (every perf run of the deployment first, by
	// design): the transition counts only the part after the eval turn.
	EvalTurnWaits        int     `json:"eval_turn_waits,omitempty"`
	EvalTurnWaitP50ms    float64 `json:"eval_turn_wait_p50_ms,omitempty"`
	EvalTurnWaitMaxms    float64 `json:"eval_turn_wait_max_ms,omitempty"`
	TransitionP50ms      float64 `json:"transition_p50_ms"`
	TransitionP99ms      float64 `json:"transition_p99_ms"`
	PointEventsMax       int     `json:"point_history_events_max"`
	PointEventsP50       int     `json:"point_history_events_p50"`
	PointHistoryBytesMax int     `json:"point_history_bytes_max"`
	// PointUpsertsMax: search-attribute upserts in one point's history
	// (each rewrites its visibility row; the SDK adds one per first
	// GetVersion of a run), besides the start and close writes.
	PointUpsertsMax     int            `json:"point_upserts_max"`
	ParentEventsMax     int            `json:"parent_history_events_max"`
	DeploymentEventsMax int            `json:"deployment_history_events_max,omitempty"`
	MaxHistoryEvents    int            `json:"max_history_events"`
	ContinuedAsNew      int            `json:"continued_as_new"`
	InputBytesMax       int            `json:"max_activity_input_bytes"`
	InputBytesP50       int            `json:"activity_input_bytes_p50"`
	RowBytesP50         int            `json:"row_bytes_per_input_p50"`
	InputBytesByType    map[string]int `json:"max_input_bytes_by_activity"`
	// LargestInput is where the bytes of the largest activity input are:
	// JSON bytes per field ("point.row", "point.profile", "stages", ...).
	LargestInput        map[string]int `json:"largest_input_bytes_by_field"`
	LargestInputType    string         `json:"largest_input_activity"`
	ChildInputBytesMax  int            `json:"point_workflow_input_bytes_max"`
	CANInputBytesMax    int            `json:"continue_as_new_input_bytes_max"`
	StartInputBytes     int            `json:"sweep_start_input_bytes"`
	ResultBytes         int            `json:"sweep_result_bytes"`
	NoopAllocationsHeld int            `json:"noop_allocations_left_held"`
	LoadAvg             [2]float64     `json:"load_avg_1m_start_end"`
}

// OrchestrationReport is the command's output: medians of the runs at the top.
type OrchestrationReport struct {
	PointsPerMin     float64            `json:"points_per_min"`
	TransitionP50ms  float64            `json:"transition_p50_ms"`
	TransitionP99ms  float64            `json:"transition_p99_ms"`
	MaxHistoryEvents int                `json:"max_history_events"`
	InputBytesMax    int                `json:"max_activity_input_bytes"`
	Median           OrchestrationRun   `json:"median"`
	Runs             []OrchestrationRun `json:"runs"`
	Points           int                `json:"points"`
	Parallel         int                `json:"parallel"`
	PerDeployment    int                `json:"per_deployment"`
	Pollers          int                `json:"pollers"`
	Eager            bool               `json:"eager"`
	Server           string             `json:"server"`
	CPUs             int                `json:"cpus"`
	Goals            orchGoals          `json:"goals"`
}

type orchGoals struct {
	PointsPerMin     bool `json:"points_per_min_ge_700"`
	TransitionP50    bool `json:"transition_p50_le_50ms"`
	HistoryEvents    bool `json:"history_events_le_10000"`
	ActivityInputs4K bool `json:"activity_inputs_lt_4KB"`
}

// Run runs the sweeps and writes the report to stdout (progress to
// stderr). Validate first; Template must hold points.
func (o *Orchestration) Run(ctx context.Context, stdout, stderr io.Writer) error {
	f, template := o, o.Template
	stop, err := startCPUProfile(f.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(stderr), zap.ErrorLevel))

	opts, err := temporalx.ClientOptions(nil)
	if err != nil {
		return err
	}
	opts.Logger = temporalx.SDKLogger(log)
	if !f.Gzip {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	server := f.Address
	if f.Address == "" {
		tuned := "tuned: " + strings.Join(temporalx.TunedPragmas, ", ") + ", " + strings.Join(temporalx.TunedDynamicConfig, ", ")
		switch {
		case f.Stock:
			server = "embedded dev server (the Temporal CLI's, stock defaults)"
		case f.OwnDevServer:
			server = "embedded dev server, " + temporalx.DevServerBinary + " (no metrics endpoint; " + tuned + ")"
		default:
			server = "embedded dev server, the Temporal CLI's (" + temporalx.DevServerBinary + " not built; " + tuned + ")"
		}
		if extra := append(append([]string{}, f.Pragmas...), f.DynamicConfig...); len(extra) > 0 {
			server += " + " + strings.Join(extra, ", ")
		}
		if f.SameServer {
			server += ", one server for all runs"
		} else {
			server += ", a fresh server for each run"
		}
	}
	// connect starts the embedded server unless --address names one, and
	// dials it; done closes the client and stops the server it started.
	connect := func() (client.Client, func(), error) {
		o := opts
		stop := func() {}
		if f.Address != "" {
			o.HostPort = f.Address
		} else {
			d, s, err := startBenchDevServer(ctx, f.DevServer, f.Stock, f.DynamicConfig, f.Pragmas)
			if err != nil {
				return nil, nil, err
			}
			o.HostPort, stop = d.Address(), s
		}
		c, err := client.Dial(o)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("connecting to Temporal at %s: %w", o.HostPort, err)
		}
		return c, func() { c.Close(); stop() }, nil
	}
	// Runs on one embedded server are not independent samples: each later
	// run meets the earlier runs' histories, visibility rows and pending
	// timer tasks (a fresh 1,000-point run ~900 points/min, the next one on
	// the same server 600-740). By default each run gets its own server;
	// --same-server measures the accumulation.
	perRun := f.Address == "" && !f.SameServer
	var c client.Client
	if !perRun {
		cc, done, err := connect()
		if err != nil {
			return err
		}
		defer done()
		c = cc
	}

	rep := OrchestrationReport{Points: f.Points, Parallel: f.Parallel, PerDeployment: f.PerDeployment, Pollers: f.Pollers, Eager: f.Eager, Server: server, CPUs: runtime.NumCPU()}
	for i := 0; i < f.Runs; i++ {
		if !f.JSON {
			fmt.Fprintf(stderr, "run %d of %d: %d points ...\n", i+1, f.Runs, f.Points)
		}
		rc, done := c, func() {}
		if perRun {
			cc, d, err := connect()
			if err != nil {
				return fmt.Errorf("run %d: %w", i+1, err)
			}
			rc, done = cc, d
		}
		r, err := benchOrchRun(ctx, rc, f, template, log)
		done()
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		rep.Runs = append(rep.Runs, r)
	}
	rep.Median = medianRun(rep.Runs)
	m := rep.Median
	rep.PointsPerMin, rep.TransitionP50ms, rep.TransitionP99ms = m.PointsPerMin, m.TransitionP50ms, m.TransitionP99ms
	rep.MaxHistoryEvents, rep.InputBytesMax = m.MaxHistoryEvents, m.InputBytesMax
	rep.Goals = orchGoals{
		PointsPerMin: m.PointsPerMin >= orchGoalPointsPerMin, TransitionP50: m.TransitionP50ms <= orchGoalTransitionP50,
		HistoryEvents: m.MaxHistoryEvents <= orchGoalHistoryEvents, ActivityInputs4K: m.InputBytesMax < orchGoalInputBytes,
	}
	if f.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printOrchReport(stdout, rep)
	return nil
}

// benchPoints repeats the template to n points with unique IDs and
// identities, one node each; every perDeployment consecutive points share
// a deployment (the identity's deployment part).
func benchPoints(template []point.Spec, n, perDeployment int) []point.Spec {
	out := make([]point.Spec, n)
	for i := range out {
		p := template[(i/perDeployment)%len(template)]
		p.PointID += fmt.Sprintf("-b%05d", i)
		dep := fmt.Sprintf("b%05d", i/perDeployment)
		if id, err := point.Parse(p.Identity); err == nil {
			id.DeploymentHash = dep + id.DeploymentHash // in front: deployment workflow IDs keep 16 characters
			id.Conc = i                                 // unique within a deployment
			p.Identity = id.String()
			p.DeploymentHash = id.DeploymentHash
		} else {
			p.Identity = dep + "-c" + fmt.Sprint(i)
			p.DeploymentHash = ""
		}
		p.Nodes = 1
		p.Faults = nil
		out[i] = p
	}
	return out
}

// startBenchDevServer starts the embedded dev server (binary bin) on a free
// port in a temporary directory; stop ends it and removes the directory.
func startBenchDevServer(ctx context.Context, bin string, stock bool, dynamicConfig, pragmas []string) (temporalx.DevServer, func(), error) {
	dir, err := os.MkdirTemp("", "sweepflow-bench-orch-*")
	if err != nil {
		return temporalx.DevServer{}, nil, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		os.RemoveAll(dir)
		return temporalx.DevServer{}, nil, err
	}
	d := temporalx.DevServer{Binary: bin, DataDir: filepath.Join(dir, "temporal"), IP: "127.0.0.1", Port: port, Headless: true,
		Stock: stock, DynamicConfig: dynamicConfig, Pragmas: pragmas, SearchAttributes: temporalx.SearchAttributeTypes()}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	stop := func() { _ = d.Stop(); _ = os.RemoveAll(dir) }
	if _, _, err := d.Start(sctx); err != nil {
		stop()
		return temporalx.DevServer{}, nil, err
	}
	return d, stop, nil
}

// benchActivities runs the real allocate, checkpoint, bring-up and teardown
// activities on the no-op backend; the stages that would talk to a server
// or the ledger return at once with empty, simulated-labelled outputs.
type benchActivities struct {
	*activities.Activities
}

func (benchActivities) Warmup(context.Context, activities.StageInput) error { return nil }

func (benchActivities) Perf(context.Context, activities.StageInput) (point.PerfSummary, error) {
	return point.PerfSummary{Simulated: true}, nil
}

func (benchActivities) Eval(context.Context, activities.StageInput) (point.EvalSummary, error) {
	return point.EvalSummary{Passed: true, Simulated: true, Reason: "no-op backend: nothing measured"}, nil
}

func (benchActivities) Upload(context.Context, activities.UploadInput) error      { return nil }
func (benchActivities) RecordPoint(context.Context, activities.PointRecord) error { return nil }
func (benchActivities) RecordSweep(context.Context, activities.SweepRecord) error { return nil }
func (benchActivities) LookupReuse(context.Context, activities.ReuseRequest) (activities.Reused, error) {
	return activities.Reused{}, nil
}

func benchRandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchOrchRun runs one sweep with its own worker and measures it.
func benchOrchRun(ctx context.Context, c client.Client, f *Orchestration, template []point.Spec, log *zap.Logger) (OrchestrationRun, error) {
	id := "bench-orch-" + benchRandomHex(4)
	wfQueue, actQueue := id, id
	if !f.Eager {
		actQueue = id + "-cluster"
	}
	backend := noop.New()
	acts := benchActivities{&activities.Activities{Backend: backend, GPUsPerNode: 4, Simulated: true, Engine: "noop",
		StateDir: filepath.Join(os.TempDir(), id), HealthInterval: 10 * time.Millisecond, Logger: zap.NewNop()}}
	defer os.RemoveAll(acts.StateDir)
	wopts := worker.Options{
		MaxConcurrentWorkflowTaskPollers: f.Pollers, MaxConcurrentActivityTaskPollers: f.Pollers,
		DeadlockDetectionTimeout: 5 * time.Second, WorkerStopTimeout: 5 * time.Second,
	}
	ww := worker.New(c, wfQueue, wopts)
	workflows.Register(ww)
	ws := []worker.Worker{ww}
	if f.Eager {
		ww.RegisterActivity(&acts)
	} else {
		aw := worker.New(c, actQueue, wopts)
		aw.RegisterActivity(&acts)
		ws = append(ws, aw)
	}
	for _, w := range ws {
		if err := w.Start(); err != nil {
			return OrchestrationRun{}, err
		}
		defer w.Stop()
	}

	// The plan goes to a ledger, as `starter sweep start` stores it; the
	// sweep loads it in pages (LoadPlanPage), so its start input stays a
	// few hundred bytes at 10,000 points.
	plan := benchPoints(template, f.Points, f.PerDeployment)
	if err := os.MkdirAll(acts.StateDir, 0o755); err != nil {
		return OrchestrationRun{}, err
	}
	store, err := results.Open(ctx, filepath.Join(acts.StateDir, "ledger.db"))
	if err != nil {
		return OrchestrationRun{}, err
	}
	defer store.Close()
	acts.Store = store
	in := workflows.SweepInput{SweepID: id, Name: "bench-orchestration", Cluster: noop.Name, TaskQueue: actQueue,
		NodeBudget: f.Parallel, Points: plan, HistoryLimit: f.HistoryLimit,
		Tuning: workflows.Tuning{RetryInterval: time.Second, MaxAttempts: 3, HeartbeatTimeout: 10 * time.Second}}
	planJSON, err := json.Marshal(&in)
	if err != nil {
		return OrchestrationRun{}, err
	}
	if err := store.PutSweepPlan(ctx, results.SweepPlan{SweepID: id, PlanJSON: planJSON}); err != nil {
		return OrchestrationRun{}, err
	}
	in.Points, in.PlanRef = nil, id
	r := OrchestrationRun{SweepID: id, Points: f.Points}
	r.LoadAvg[0] = orchLoadAvg1()
	rctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	t0 := time.Now()
	run, err := c.ExecuteWorkflow(rctx, client.StartWorkflowOptions{ID: id, TaskQueue: wfQueue}, workflows.SweepWorkflow, in)
	if err != nil {
		return r, err
	}
	firstRun := run.GetRunID() // Get follows continue-as-new and moves the run ID on
	var res workflows.SweepProgress
	if err := run.Get(rctx, &res); err != nil {
		if why := whyClosed(ctx, c, id); why != "" {
			return r, fmt.Errorf("sweep %s: %w; %s", id, err, why)
		}
		return r, fmt.Errorf("sweep %s: %w", id, err)
	}
	clientWall := time.Since(t0)
	r.LoadAvg[1] = orchLoadAvg1()
	r.Completed = res.Counts[point.StatusCompleted]
	r.NoopAllocationsHeld = backend.Held()
	if r.Completed != f.Points {
		first := ""
		for _, p := range res.Points {
			if p.Outcome != nil && p.Status != point.StatusCompleted {
				first = fmt.Sprintf("; first: %s %s: %s", p.PointID, p.Status, p.Outcome.Error)
				break
			}
		}
		return r, fmt.Errorf("sweep %s: %d of %d points completed (%v)%s", id, r.Completed, f.Points, res.Counts, first)
	}

	parent, err := sweepRunsStats(rctx, c, id, firstRun)
	if err != nil {
		return r, err
	}
	r.ContinuedAsNew = len(parent.events) - 1
	for _, n := range parent.events {
		r.ParentEventsMax = max(r.ParentEventsMax, n)
	}
	r.ChildInputBytesMax, r.CANInputBytesMax, r.ResultBytes = parent.childInputMax, parent.canInputMax, parent.resultBytes
	r.StartInputBytes = parent.startInputBytes
	wall := parent.end.Sub(parent.start)
	if wall <= 0 {
		wall = clientWall
	}
	r.WallS = wall.Seconds()

	ids := make([]string, 0, len(plan))
	for _, p := range plan {
		ids = append(ids, workflows.PointWorkflowID(id, p.PointID))
	}
	pts, err := pointsStats(rctx, c, ids)
	if err != nil {
		return r, err
	}
	if f.PerDeployment > 1 {
		seen := map[string]bool{}
		var deps []string
		for _, p := range plan {
			if k := p.DeploymentKey(); !seen[k] {
				seen[k] = true
				deps = append(deps, workflows.DeploymentWorkflowID(id, k))
			}
		}
		ds, err := pointsStats(rctx, c, deps)
		if err != nil {
			return r, err
		}
		for _, d := range ds {
			r.DeploymentEventsMax = max(r.DeploymentEventsMax, d.events)
		}
	}
	var trans, waits []float64
	var events, inputs, rows []int
	largest, largestIn := -1, (*commonpb.Payloads)(nil)
	r.InputBytesByType = map[string]int{}
	for _, p := range pts {
		events = append(events, p.events)
		trans = append(trans, p.transitionsMs...)
		waits = append(waits, p.evalTurnWaitsMs...)
		r.Activities += len(p.acts)
		r.PointHistoryBytesMax = max(r.PointHistoryBytesMax, p.historyBytes)
		r.PointUpsertsMax = max(r.PointUpsertsMax, p.upserts)
		for _, a := range p.acts {
			inputs = append(inputs, a.inputBytes)
			rows = append(rows, a.rowBytes)
			r.InputBytesByType[a.name] = max(r.InputBytesByType[a.name], a.inputBytes)
			if a.inputBytes > largest {
				largest, largestIn = a.inputBytes, a.input
				r.LargestInputType = a.name
			}
		}
	}
	r.LargestInput = inputFields(largestIn)
	r.Transitions = len(trans)
	r.TransitionP50ms, r.TransitionP99ms = loadgen.PercentileOf(trans, 50, loadgen.Linear), loadgen.PercentileOf(trans, 99, loadgen.Linear)
	r.EvalTurnWaits = len(waits)
	if len(waits) > 0 {
		r.EvalTurnWaitP50ms, r.EvalTurnWaitMaxms = loadgen.PercentileOf(waits, 50, loadgen.Linear), loadgen.PercentileOf(waits, 100, loadgen.Linear)
	}
	r.PointEventsMax, r.PointEventsP50 = maxInt(events), loadgen.PercentileOf(events, 50, loadgen.Linear)
	r.InputBytesMax, r.InputBytesP50, r.RowBytesP50 = maxInt(inputs), loadgen.PercentileOf(inputs, 50, loadgen.Linear), loadgen.PercentileOf(rows, 50, loadgen.Linear)
	r.MaxHistoryEvents = max(r.PointEventsMax, r.ParentEventsMax, r.DeploymentEventsMax)
	min := wall.Minutes()
	r.PointsPerMin = float64(f.Points) / min
	r.ActivitiesPerMin = float64(r.Activities) / min
	return r, nil
}

// whyClosed reads the last failed workflow task and the termination reason
// of a sweep's latest run: a result or continue-as-new input over the
// server's blob size limit shows up there, not in the client's error.
func whyClosed(ctx context.Context, c client.Client, wid string) string {
	evs, err := orchHistory(ctx, c, wid, "")
	if err != nil {
		return ""
	}
	var parts []string
	for i := len(evs) - 1; i >= 0 && len(parts) < 2; i-- {
		e := evs[i]
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			parts = append(parts, "terminated: "+e.GetWorkflowExecutionTerminatedEventAttributes().GetReason())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			a := e.GetWorkflowTaskFailedEventAttributes()
			parts = append(parts, fmt.Sprintf("last workflow task failed (%s): %s", a.GetCause(), a.GetFailure().GetMessage()))
			i = 0
		}
	}
	return strings.Join(parts, "; ")
}

// parentStats are the sweep workflow's runs (one per continue-as-new).
type parentStats struct {
	events        []int
	start, end    time.Time
	childInputMax int
	canInputMax   int
	// startInputBytes is the first run's input.
	startInputBytes int
	resultBytes     int
}

func sweepRunsStats(ctx context.Context, c client.Client, wid, runID string) (parentStats, error) {
	var ps parentStats
	for runID != "" {
		evs, err := orchHistory(ctx, c, wid, runID)
		if err != nil {
			return ps, err
		}
		next := analyzeParentRun(evs, &ps)
		runID = next
	}
	return ps, nil
}

// analyzeParentRun adds one run of the sweep workflow to ps and returns the
// next run's ID after a continue-as-new.
func analyzeParentRun(evs []*historypb.HistoryEvent, ps *parentStats) string {
	ps.events = append(ps.events, len(evs))
	next := ""
	for _, e := range evs {
		t := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if ps.start.IsZero() {
				ps.start = t
				ps.startInputBytes = orchPayloadsBytes(e.GetWorkflowExecutionStartedEventAttributes().GetInput())
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			ps.childInputMax = max(ps.childInputMax, orchPayloadsBytes(e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetInput()))
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			a := e.GetWorkflowExecutionContinuedAsNewEventAttributes()
			ps.canInputMax = max(ps.canInputMax, orchPayloadsBytes(a.GetInput()))
			next = a.GetNewExecutionRunId()
			ps.end = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			ps.resultBytes = orchPayloadsBytes(e.GetWorkflowExecutionCompletedEventAttributes().GetResult())
			ps.end = t
		}
	}
	return next
}

// pointStats is one point workflow's history.
type pointStats struct {
	events        int
	historyBytes  int
	upserts       int
	acts          []actStats
	transitionsMs []float64
	// evalTurnWaitsMs: activity gaps spanning the wait for the deployment's
	// eval phase (SignalEvalTurn), which is scheduling by design.
	evalTurnWaitsMs []float64
}

type actStats struct {
	name       string
	input      *commonpb.Payloads
	inputBytes int
	rowBytes   int
	scheduled  int64
	started    time.Time
	completed  time.Time
}

func pointsStats(ctx context.Context, c client.Client, ids []string) ([]pointStats, error) {
	out := make([]pointStats, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				evs, err := orchHistory(ctx, c, ids[i], "")
				if err != nil {
					errs[i] = err
					continue
				}
				out[i] = analyzePoint(evs)
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// analyzePoint reads a point's activities from its history: input sizes and
// the transitions from one activity's completion to the next one's start.
func analyzePoint(evs []*historypb.HistoryEvent) pointStats {
	ps := pointStats{events: len(evs)}
	byID := map[int64]*actStats{}
	var order []*actStats
	var turns []time.Time
	for _, e := range evs {
		ps.historyBytes += orchProtoSize(e)
		t := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			ps.upserts++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := e.GetActivityTaskScheduledEventAttributes()
			st := &actStats{name: a.GetActivityType().GetName(), input: a.GetInput(), inputBytes: orchPayloadsBytes(a.GetInput()),
				rowBytes: orchRowBytes(a.GetInput()), scheduled: e.GetEventId()}
			byID[e.GetEventId()] = st
			order = append(order, st)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if st := byID[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; st != nil {
				st.started = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if st := byID[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; st != nil {
				st.completed = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalEvalTurn {
				turns = append(turns, t)
			}
		}
	}
	for i, a := range order {
		ps.acts = append(ps.acts, *a)
		if i == 0 {
			continue
		}
		prev := order[i-1]
		if prev.completed.IsZero() || a.started.IsZero() || a.started.Before(prev.completed) {
			continue
		}
		from := prev.completed
		for _, turn := range turns {
			if !turn.Before(prev.completed) && !turn.After(a.started) {
				// The point waited for its deployment's eval phase: only
				// the time from its turn to its next activity is a transition.
				ps.evalTurnWaitsMs = append(ps.evalTurnWaitsMs, float64(turn.Sub(prev.completed).Microseconds())/1000)
				from = turn
			}
		}
		ps.transitionsMs = append(ps.transitionsMs, float64(a.started.Sub(from).Microseconds())/1000)
	}
	return ps
}

func orchHistory(ctx context.Context, c client.Client, wid, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var evs []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", wid, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

func orchProtoSize(e *historypb.HistoryEvent) int {
	b, err := e.Marshal()
	if err != nil {
		return 0
	}
	return len(b)
}

// payloadsBytes is the data bytes of the payloads (metadata excluded).
func orchPayloadsBytes(p *commonpb.Payloads) int {
	n := 0
	for _, x := range p.GetPayloads() {
		n += len(x.GetData())
	}
	return n
}

// rowBytes finds the matrix row JSON in an activity input: the "row" of a
// PointSpec argument or of its "point" field.
func orchRowBytes(p *commonpb.Payloads) int {
	n := 0
	for _, x := range p.GetPayloads() {
		var top map[string]json.RawMessage
		if json.Unmarshal(x.GetData(), &top) != nil {
			continue
		}
		if r, ok := top["row"]; ok {
			n += len(r)
			continue
		}
		var pt map[string]json.RawMessage
		if json.Unmarshal(top["point"], &pt) == nil {
			n += len(pt["row"])
		}
	}
	return n
}

// inputFields splits a JSON activity input into the bytes of its fields;
// the fields of a PointSpec (the input itself, or its "point") are named
// "point.<field>".
func inputFields(p *commonpb.Payloads) map[string]int {
	out := map[string]int{}
	for _, x := range p.GetPayloads() {
		var top map[string]json.RawMessage
		if json.Unmarshal(x.GetData(), &top) != nil {
			continue
		}
		if _, ok := top["point_id"]; ok { // the PointSpec itself
			top = map[string]json.RawMessage{"point": x.GetData()}
		}
		for k, v := range top {
			var pt map[string]json.RawMessage
			if k == "point" && json.Unmarshal(v, &pt) == nil {
				for pk, pv := range pt {
					out["point."+pk] += len(pk) + 3 + len(pv)
				}
				continue
			}
			out[k] += len(k) + 3 + len(v)
		}
	}
	return out
}

func maxInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// medianRun is the per-figure median of the runs (the first run's IDs and
// per-activity maxima, which do not vary).
func medianRun(rs []OrchestrationRun) OrchestrationRun {
	m := rs[0]
	m.SweepID = ""
	mf := func(get func(OrchestrationRun) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		return loadgen.PercentileOf(xs, 50, loadgen.Linear)
	}
	mi := func(get func(OrchestrationRun) int) int {
		return int(mf(func(r OrchestrationRun) float64 { return float64(get(r)) }))
	}
	m.WallS = mf(func(r OrchestrationRun) float64 { return r.WallS })
	m.PointsPerMin = mf(func(r OrchestrationRun) float64 { return r.PointsPerMin })
	m.ActivitiesPerMin = mf(func(r OrchestrationRun) float64 { return r.ActivitiesPerMin })
	m.TransitionP50ms = mf(func(r OrchestrationRun) float64 { return r.TransitionP50ms })
	m.TransitionP99ms = mf(func(r OrchestrationRun) float64 { return r.TransitionP99ms })
	m.PointEventsMax = mi(func(r OrchestrationRun) int { return r.PointEventsMax })
	m.PointEventsP50 = mi(func(r OrchestrationRun) int { return r.PointEventsP50 })
	m.PointHistoryBytesMax = mi(func(r OrchestrationRun) int { return r.PointHistoryBytesMax })
	m.PointUpsertsMax = mi(func(r OrchestrationRun) int { return r.PointUpsertsMax })
	m.ParentEventsMax = mi(func(r OrchestrationRun) int { return r.ParentEventsMax })
	m.DeploymentEventsMax = mi(func(r OrchestrationRun) int { return r.DeploymentEventsMax })
	m.MaxHistoryEvents = mi(func(r OrchestrationRun) int { return r.MaxHistoryEvents })
	m.ContinuedAsNew = mi(func(r OrchestrationRun) int { return r.ContinuedAsNew })
	m.InputBytesMax = mi(func(r OrchestrationRun) int { return r.InputBytesMax })
	m.InputBytesP50 = mi(func(r OrchestrationRun) int { return r.InputBytesP50 })
	m.RowBytesP50 = mi(func(r OrchestrationRun) int { return r.RowBytesP50 })
	m.ChildInputBytesMax = mi(func(r OrchestrationRun) int { return r.ChildInputBytesMax })
	m.CANInputBytesMax = mi(func(r OrchestrationRun) int { return r.CANInputBytesMax })
	m.ResultBytes = mi(func(r OrchestrationRun) int { return r.ResultBytes })
	m.LoadAvg[0] = mf(func(r OrchestrationRun) float64 { return r.LoadAvg[0] })
	m.LoadAvg[1] = mf(func(r OrchestrationRun) float64 { return r.LoadAvg[1] })
	return m
}

func printOrchReport(w io.Writer, rep OrchestrationReport) {
	eager := "eager activities (one task queue)"
	if !rep.Eager {
		eager = "two task queues (control + cluster), no eager activities"
	}
	fmt.Fprintf(w, "orchestration: %d points x %d runs, %d in flight, %d pollers, %s\nserver: %s; %d CPUs\n\n",
		rep.Points, len(rep.Runs), rep.Parallel, rep.Pollers, eager, rep.Server, rep.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "figure\t"
	for i := range rep.Runs {
		head += fmt.Sprintf("run %d\t", i+1)
	}
	fmt.Fprintln(tw, head+"median\tgoal\t")
	row := func(name string, get func(OrchestrationRun) string, goal string) {
		line := name + "\t"
		for _, r := range rep.Runs {
			line += get(r) + "\t"
		}
		fmt.Fprintln(tw, line+get(rep.Median)+"\t"+goal+"\t")
	}
	ok := func(b bool) string {
		if b {
			return " (met)"
		}
		return " (NOT met)"
	}
	f1 := func(g func(OrchestrationRun) float64) func(OrchestrationRun) string {
		return func(r OrchestrationRun) string { return fmt.Sprintf("%.1f", g(r)) }
	}
	d := func(g func(OrchestrationRun) int) func(OrchestrationRun) string {
		return func(r OrchestrationRun) string { return fmt.Sprintf("%d", g(r)) }
	}
	row("points/min", f1(func(r OrchestrationRun) float64 { return r.PointsPerMin }), fmt.Sprintf(">= %d%s", orchGoalPointsPerMin, ok(rep.Goals.PointsPerMin)))
	row("activities/min", f1(func(r OrchestrationRun) float64 { return r.ActivitiesPerMin }), "")
	row("activities per point", f1(func(r OrchestrationRun) float64 { return float64(r.Activities) / float64(max(r.Points, 1)) }), "")
	row("wall s", f1(func(r OrchestrationRun) float64 { return r.WallS }), "")
	row("transition p50 ms", f1(func(r OrchestrationRun) float64 { return r.TransitionP50ms }), fmt.Sprintf("<= %d%s", orchGoalTransitionP50, ok(rep.Goals.TransitionP50)))
	row("transition p99 ms", f1(func(r OrchestrationRun) float64 { return r.TransitionP99ms }), "")
	if rep.PerDeployment > 1 {
		row("eval-turn waits (excluded)", d(func(r OrchestrationRun) int { return r.EvalTurnWaits }), "")
		row("eval-turn wait p50 ms", f1(func(r OrchestrationRun) float64 { return r.EvalTurnWaitP50ms }), "")
		row("eval-turn wait max ms", f1(func(r OrchestrationRun) float64 { return r.EvalTurnWaitMaxms }), "")
	}
	row("point history events max", d(func(r OrchestrationRun) int { return r.PointEventsMax }), "")
	row("point history events p50", d(func(r OrchestrationRun) int { return r.PointEventsP50 }), "")
	row("point history bytes max", d(func(r OrchestrationRun) int { return r.PointHistoryBytesMax }), "")
	row("point attribute upserts max", d(func(r OrchestrationRun) int { return r.PointUpsertsMax }), "")
	row("sweep parent events (max run)", d(func(r OrchestrationRun) int { return r.ParentEventsMax }), fmt.Sprintf("<= %d%s", orchGoalHistoryEvents, ok(rep.Goals.HistoryEvents)))
	if rep.Median.DeploymentEventsMax > 0 {
		row("deployment workflow events max", d(func(r OrchestrationRun) int { return r.DeploymentEventsMax }), "")
	}
	row("parent continued as new", d(func(r OrchestrationRun) int { return r.ContinuedAsNew }), "")
	row("activity input bytes max", d(func(r OrchestrationRun) int { return r.InputBytesMax }), fmt.Sprintf("< %d%s", orchGoalInputBytes, ok(rep.Goals.ActivityInputs4K)))
	row("activity input bytes p50", d(func(r OrchestrationRun) int { return r.InputBytesP50 }), "")
	row("  of which row JSON p50", d(func(r OrchestrationRun) int { return r.RowBytesP50 }), "")
	row("point workflow input bytes max", d(func(r OrchestrationRun) int { return r.ChildInputBytesMax }), "")
	row("sweep start input bytes", d(func(r OrchestrationRun) int { return r.StartInputBytes }), "")
	row("continue-as-new input bytes max", d(func(r OrchestrationRun) int { return r.CANInputBytesMax }), "")
	row("sweep result bytes", d(func(r OrchestrationRun) int { return r.ResultBytes }), "")
	row("load avg 1m start", f1(func(r OrchestrationRun) float64 { return r.LoadAvg[0] }), "")
	row("load avg 1m end", f1(func(r OrchestrationRun) float64 { return r.LoadAvg[1] }), "")
	tw.Flush()
	names := make([]string, 0, len(rep.Median.InputBytesByType))
	for n := range rep.Median.InputBytesByType {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, rep.Median.InputBytesByType[n]))
	}
	fmt.Fprintf(w, "\nmax input bytes by activity (run 1): %s\n", strings.Join(parts, ", "))
	fields := make([]string, 0, len(rep.Median.LargestInput))
	for k := range rep.Median.LargestInput {
		fields = append(fields, k)
	}
	sort.Slice(fields, func(i, j int) bool {
		a, b := rep.Median.LargestInput[fields[i]], rep.Median.LargestInput[fields[j]]
		return a > b || a == b && fields[i] < fields[j]
	})
	parts = parts[:0]
	for _, k := range fields[:min(len(fields), 8)] {
		parts = append(parts, fmt.Sprintf("%s %d", k, rep.Median.LargestInput[k]))
	}
	fmt.Fprintf(w, "largest input (%s) by JSON field: %s\n", rep.Median.LargestInputType, strings.Join(parts, ", "))
}

// loadAvg1 is the 1-minute load average (0 where /proc is missing).
func orchLoadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(string(b), "%f", &l)
	return l
}
