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
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster/noop"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// Goals of issue 14 for 1,000 points on the embedded dev server.
const (
	orchGoalPointsPerMin  = 700
	orchGoalTransitionP50 = 50 // ms
	orchGoalHistoryEvents = 10000
	orchGoalInputBytes    = 4096
)

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
		// A server this run just started may still be bringing its
		// frontend up ("Frontend is not healthy yet", seen on a loaded
		// host): ask again for a while.
		for wait := time.Now().Add(30 * time.Second); err != nil && f.Address == "" && time.Now().Before(wait) && ctx.Err() == nil; {
			time.Sleep(200 * time.Millisecond)
			c, err = client.Dial(o)
		}
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
