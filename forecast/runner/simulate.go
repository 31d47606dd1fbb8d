package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// epoch is the virtual start of every simulated sweep: a fixed instant, so
// the same input gives the same timeline.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Simulate runs the real SweepWorkflow (with DeploymentWorkflow and
// PointWorkflow as its children) in the SDK's time-skipping test
// environment. Every stage activity first waits clock's duration (to the
// second) on a workflow timer, which the environment skips in virtual time
// once every workflow is blocked, then answers with a stub of the
// activity's real name that returns at once. So the order, the
// concurrency and the node budget are the sweep's own: there is no second
// scheduler. Stages that end at one instant end in plan order (see
// recorder), so the same input gives the same timeline.
func Simulate(in workflows.SweepInput, clock forecast.Clock) (*forecast.Timeline, error) {
	if in.SweepID == "" {
		in.SweepID = "forecast"
	}
	// One run: a forecast neither drains nor continues as new (the stub
	// environment reports no history size). A stored start input carries
	// its points; what an earlier run did is not this forecast's.
	in.HistoryLimit, in.PointsPerRun = math.MaxInt32, 0
	in.PlanRef, in.PlanOffset, in.PlanTotal, in.Done, in.Runs = "", 0, 0, nil, 0
	rec := &recorder{clock: clock, stubs: &stubs{}, index: map[string]int{}}
	for i, p := range in.Points {
		if _, ok := rec.index[p.PointID]; !ok {
			rec.index[p.PointID] = i
		}
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(epoch)
	// The idle timeout is wall time with nothing to do: never, here.
	env.SetTestTimeout(10 * time.Minute)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	workflows.Register(env)
	env.RegisterActivity(rec.stubs)
	env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, _ converter.EncodedValue, _ error) {
		if info.WorkflowType.Name == "PointWorkflow" {
			rec.finished(info.WorkflowExecution.ID)
		}
	})
	env.ExecuteWorkflow(workflows.SweepWorkflow, in)
	if !env.IsWorkflowCompleted() {
		return nil, fmt.Errorf("forecast: the simulated sweep did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return nil, fmt.Errorf("forecast: the simulated sweep failed: %w", err)
	}
	t := &forecast.Timeline{Start: epoch, Events: rec.events}
	var res workflows.SweepProgress
	if err := env.GetWorkflowResult(&res); err != nil {
		return nil, fmt.Errorf("forecast: the simulated sweep's result: %w", err)
	}
	// The sweep ended at its last stage's nominal end plus that stage's
	// tie-breaker.
	if t.End = res.FinishedAt; !t.End.IsZero() {
		t.End = nominal(t.End)
	}
	prefix := in.SweepID + "/"
	for _, wid := range rec.order {
		t.Finished = append(t.Finished, wid[len(prefix):])
	}
	return t, nil
}

// slots is how many stage activities of one point have a tie-breaker.
const slots = 8

// nominal is the instant a virtual time stands for: the whole second at or
// before it (it is that instant plus a tie-breaker).
func nominal(t time.Time) time.Time {
	return epoch.Add(t.Sub(epoch).Truncate(forecast.Grid))
}

// recorder is the worker interceptor that puts each stage activity behind
// a timer of its forecast duration and records what ran when.
//
// Stage timers that end at one instant would fire in the order they were
// created, which follows the order in which the environment's goroutines
// started the children that created them: the order in which points
// ending at one instant reach the sweep, and so what it starts next, would
// change from run to run. So each stage ends at its nominal end plus a
// tie-breaker of nanoseconds by its point's plan order (tie): every stage
// ends at an instant of its own, those of one nominal instant in plan
// order. Events and the makespan are taken at the nominal instants.
type recorder struct {
	interceptor.WorkerInterceptorBase
	clock forecast.Clock
	stubs *stubs
	// index is each point's position in the plan.
	index  map[string]int
	mu     sync.Mutex
	events []forecast.Event
	order  []string
}

func (r *recorder) finished(wid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, wid)
}

func (r *recorder) record(ev forecast.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// tie is a stage's tie-breaker: nanoseconds by its point's plan order,
// then the stage (below a millisecond up to 125,000 points).
func (r *recorder) tie(c forecast.Call) time.Duration {
	i, ok := r.index[c.Point.PointID]
	if !ok {
		i = len(r.index)
	}
	slot := slots - 1
	switch c.Activity {
	case "Allocate":
		slot = 0
	case "StageCheckpoint":
		slot = 1
	case "BringUp":
		slot = 2
	case "Warmup":
		slot = 3
	case "Perf":
		slot = 4
	case "Eval":
		slot = 5
	case "Teardown":
		slot = 6
	}
	return time.Duration(1 + (i*slots+slot)%int(forecast.Grid-1))
}

func (r *recorder) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &inbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
	r *recorder
}

func (i *inbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&outbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, r: i.r})
}

type outbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	r *recorder
}

// ExecuteActivity waits the stage's duration on a timer, then answers
// with the stub activity's result; the future the workflow gets settles
// with it. The stub is called here, in the workflow's coroutine, not run
// as an activity: the environment runs activities on goroutines of their
// own, and the order in which those report back is the scheduler's, not
// the sweep's.
func (o *outbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	var arg any
	if len(args) > 0 {
		arg = args[0]
	}
	c, ok := Classify(activityType, arg)
	if !ok || !o.r.stubs.answers(activityType, args) {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	d := o.r.clock.Duration(c).Round(forecast.Grid)
	start := nominal(o.Next.Now(ctx))
	ev := forecast.Event{Call: c, Start: start, End: start.Add(d)}
	fut, set := workflow.NewFuture(ctx)
	if d <= 0 {
		o.r.record(ev)
		set.Set(o.r.stubs.answer(activityType, args))
		return fut
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		// The stage ends at its nominal end plus its tie-breaker: of the
		// stages that end at one instant, the first point in plan order
		// ends first.
		wait := ev.End.Add(o.r.tie(c)).Sub(o.Next.Now(gctx))
		if err := o.Next.NewTimer(gctx, wait).Get(gctx, nil); err != nil {
			set.Set(nil, err)
			return
		}
		o.r.record(ev)
		set.Set(o.r.stubs.answer(activityType, args))
	})
	return fut
}

// Classify reads a stage call from an activity's name and first argument;
// ok is false for an activity the forecast does not know (it runs as it
// is). Tests that run a real sweep with the forecast's stage times use it
// too.
func Classify(activity string, arg any) (forecast.Call, bool) {
	c := forecast.Call{Activity: activity}
	switch a := arg.(type) {
	case point.Spec:
		c.Point = a
	case activities.StageInput:
		c.Point, c.Mode = a.Point, a.Mode
		if activity == "BringUp" {
			c.Kind = forecast.KindBringUp
			// A server already runs on the allocation: restarting it for
			// the evals is the eval restart.
			if a.Endpoint != nil && a.Mode == "eval" {
				c.Kind = forecast.KindEvalRestart
			}
		}
	case activities.UploadInput:
		c.Point = a.Point
	case activities.PointRecord:
		c.Point = a.Point
	}
	switch activity {
	case "Allocate":
		c.Kind = forecast.KindQueue
	case "StageCheckpoint":
		c.Kind = forecast.KindBringUp
	case "BringUp":
	case "Warmup":
		c.Kind = forecast.KindWarmup
	case "Perf":
		c.Kind = forecast.KindPerf
	case "Eval":
		c.Kind = forecast.KindEval
	case "Teardown":
		c.Kind = forecast.KindTeardown
	case "Upload", "CheckServer", "RecordPoint", "RecordSweep", "LookupReuse", "LoadPlanPage":
	default:
		return c, false
	}
	return c, true
}

// stubs are the stage activities under their real names: they do nothing
// and answer at once with what the next stage needs.
type stubs struct{}

// answers reports whether the stub of that name takes these arguments as
// they are.
func (s *stubs) answers(name string, args []any) bool {
	m := reflect.ValueOf(s).MethodByName(name)
	if !m.IsValid() || m.Type().NumIn() != len(args)+1 {
		return false
	}
	for i, a := range args {
		if a == nil || !reflect.TypeOf(a).AssignableTo(m.Type().In(i+1)) {
			return false
		}
	}
	return true
}

// answer calls the stub of that name (answers is true) and returns its
// result as an activity returns it to a workflow: encoded, then decoded
// by the future's Get into the workflow's variable.
func (s *stubs) answer(name string, args []any) (any, error) {
	in := []reflect.Value{reflect.ValueOf(context.Background())}
	for _, a := range args {
		in = append(in, reflect.ValueOf(a))
	}
	out := reflect.ValueOf(s).MethodByName(name).Call(in)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "forecast", err)
	}
	if len(out) == 1 {
		return nil, nil
	}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(out[0].Interface())
	if err != nil {
		return nil, err
	}
	return payloads, nil
}

func (*stubs) Allocate(_ context.Context, p point.Spec) (cluster.Allocation, error) {
	a := cluster.Allocation{JobID: "forecast-" + p.PointID, Backend: "forecast"}
	for i := range p.Nodes {
		a.Nodes = append(a.Nodes, "node-"+strconv.Itoa(i+1))
	}
	return a, nil
}

func (*stubs) StageCheckpoint(context.Context, activities.StageInput) (cluster.StageReport, error) {
	return cluster.StageReport{}, nil
}

func (*stubs) BringUp(_ context.Context, in activities.StageInput) (cluster.Server, error) {
	return cluster.Server{URL: "forecast://" + in.Alloc.JobID, Mode: in.Mode, JobID: in.Alloc.JobID}, nil
}

func (*stubs) CheckServer(context.Context, activities.StageInput) (activities.ServerCheck, error) {
	return activities.ServerCheck{AllocationAlive: true, ServerAlive: true}, nil
}

func (*stubs) Warmup(context.Context, activities.StageInput) error { return nil }

func (*stubs) Perf(context.Context, activities.StageInput) (point.PerfSummary, error) {
	return point.PerfSummary{}, nil
}

func (*stubs) Eval(context.Context, activities.StageInput) (point.EvalSummary, error) {
	return point.EvalSummary{Passed: true}, nil
}

func (*stubs) Upload(context.Context, activities.UploadInput) error      { return nil }
func (*stubs) Teardown(context.Context, activities.StageInput) error     { return nil }
func (*stubs) RecordPoint(context.Context, activities.PointRecord) error { return nil }
func (*stubs) RecordSweep(context.Context, activities.SweepRecord) error { return nil }

func (*stubs) LookupReuse(context.Context, activities.ReuseRequest) (activities.Reused, error) {
	return activities.Reused{}, nil
}

func (*stubs) LoadPlanPage(context.Context, activities.PlanPageRequest) (activities.PlanPage, error) {
	return activities.PlanPage{}, fmt.Errorf("forecast: a stored plan is not loaded page by page; pass the points")
}
