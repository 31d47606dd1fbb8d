package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// Names of the point workflow's message handlers.
const (
	QueryState   = "state"
	UpdateDecide = "decide"
)

// Operator actions accepted by the decide update. Hold does not end the
// wait: it keeps the point's allocation until the operator decides.
const (
	ActionRetry = "retry"
	ActionSkip  = "skip"
	ActionAbort = "abort"
	ActionHold  = "hold"
)

// stageAttrDelay: a stage enters the Stage search attribute once it has run
// this long, while a status change (running, awaiting-operator, the final
// one) is written at once. Every upsert rewrites the execution's visibility
// row with all its indexes, so shorter stages never cost a visibility write;
// an operator filtering on Stage sees a long stage 2 s after it started.
const stageAttrDelay = 2 * time.Second

// PointInput starts one point workflow.
type PointInput struct {
	Point     point.Spec `json:"point"`
	TaskQueue string     `json:"task_queue"` // the cluster's activity queue
	Tuning    Tuning     `json:"tuning"`
	// ReuseFrom lists sweeps whose durable stage outputs may stand in for this
	// point's when identity and measurement profile match (rerun, --reuse-from).
	ReuseFrom []string `json:"reuse_from,omitempty"`
	// Force names stages that rerun even when a reusable output exists.
	Force []string `json:"force,omitempty"`
	// Deployment is set when the point shares its deployment's allocation and
	// server with other points (DeploymentWorkflow).
	Deployment *DeploymentRole `json:"group,omitempty"`
}

// Decision is the argument of the decide update.
type Decision struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Hold keeps the point's allocation at any later operator gate instead of
	// releasing it after Tuning.NodeHold (debugging on the nodes).
	Hold bool `json:"hold,omitempty"`
}

// PointState answers the state query and is the point's final result.
type PointState struct {
	PointID     string `json:"point_id"`
	WorkflowID  string `json:"workflow_id"`
	Status      string `json:"status"`
	FailedStage string `json:"failed_stage,omitempty"`
	PointDetail
	Stages []point.StageRun   `json:"stages"`
	Eval   *point.EvalSummary `json:"eval,omitempty"`
	Reused []string           `json:"reused,omitempty"`
	// Handoff is the allocation (and server) a point of a deployment group
	// hands to the next point instead of tearing it down.
	Handoff *Lease `json:"handoff,omitempty"`
}

// PointDetail is what a point's state says about where it stands: its
// stage, latest failure, figures, reuse, what it lacks and the nodes it
// holds. `starter status` shows it as it is (control.PointView embeds it).
type PointDetail struct {
	Stage     string `json:"stage"`
	LastError string `json:"last_error,omitempty"`
	// FailureClass and FailureExcerpt are the point's latest failure (it
	// stays after a retry succeeds: it says where the GPU time went).
	FailureClass   string             `json:"failure_class,omitempty"`
	FailureExcerpt string             `json:"failure_excerpt,omitempty"`
	Perf           *point.PerfSummary `json:"perf,omitempty"`
	// ReuseNotes say why a durable stage was not reused on a rerun.
	ReuseNotes []string `json:"reuse_notes,omitempty"`
	// Skipped lists the stages an operator skipped; Missing the planned
	// outputs (perf, eval, upload) the point does not have. Either makes a
	// point that ran to its end incomplete.
	Skipped []string `json:"skipped,omitempty"`
	Missing []string `json:"missing,omitempty"`
	// RecordError says why the ledger could not record the final status:
	// it then still shows an older one.
	RecordError string `json:"record_error,omitempty"`
	// NodesHeld is how many nodes the point holds right now: 0 before
	// allocation, after teardown, and while it waits for an operator past
	// the node hold.
	NodesHeld int `json:"nodes_held"`
	// Released: the nodes were released while the point waited for an
	// operator; a retry allocates again.
	Released bool `json:"released,omitempty"`
	// Hold: the operator asked to keep the nodes while the point waits.
	Hold bool `json:"hold,omitempty"`
}

type pointRun struct {
	in       PointInput
	acts     *activities.Activities
	state    PointState
	waiting  bool
	decision *Decision
	// reallocations counts fresh allocations after a lost one.
	reallocations int
	// alloc is the current allocation while allocated is true.
	alloc     cluster.Allocation
	allocated bool
	// endpoint is the server running on the allocation (group points).
	endpoint *cluster.Server
	// handBack: on success the allocation goes to the next point of the
	// group; evalTurnDone: a deferred eval got its turn.
	handBack     bool
	evalTurnDone bool
	// publishedStatus is the PointStatus last written.
	publishedStatus string
	// The running stage for watchStages: stageSeq counts stage
	// rounds, stageSince is when the current one started, publishedSeq the
	// round whose name the Stage attribute holds.
	stageRunning bool
	stageSeq     int
	publishedSeq int
	stageSince   time.Time
}

// PointWorkflow runs the stages of one sweep point on one allocation:
// allocate, checkpoint staging, bring-up, warmup, perf, GSM8K eval, upload,
// and always teardown. A stage that is out of retries waits for an operator.
func PointWorkflow(ctx workflow.Context, in PointInput) (*PointState, error) {
	r := &pointRun{in: in}
	r.state = PointState{
		PointID:    in.Point.PointID,
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		Status:     point.StatusRunning,
	}
	// The status the parent started the point with is already written.
	r.publishedStatus, _ = workflow.GetTypedSearchAttributes(ctx).GetKeyword(temporalx.SAPointStatus)
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	wctx, stopWatch := workflow.WithCancel(ctx)
	workflow.Go(wctx, r.watchStages)
	err := r.run(ctx)
	// Cancelled here, the watcher's pending timer goes in the same
	// workflow task as the ledger record, not one of its own.
	stopWatch()
	r.finish(ctx, err)
	// Let an in-flight decide update reply before the workflow closes.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if err == nil && r.state.RecordError != "" {
		// The point ran, but the ledger still shows an older status:
		// the sweep reports the point failed, with why.
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("point %s %s, but the ledger still shows an older status: recording it failed: %s", in.Point.PointID, r.state.Status, r.state.RecordError),
			string(failure.ErrPointUnrecorded), nil, r.state)
	}
	if err != nil {
		var canceled *temporal.CanceledError
		if errors.As(err, &canceled) || ctx.Err() != nil {
			return &r.state, err
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("point %s %s at stage %s: %v", in.Point.PointID, r.state.Status, r.state.FailedStage, err),
			string(failure.ErrPointAborted), err, r.state)
	}
	return &r.state, nil
}

func (r *pointRun) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (PointState, error) {
		return r.state, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide,
		func(ctx workflow.Context, d Decision) (string, error) {
			if d.Hold || d.Action == ActionHold {
				r.state.Hold = true
			}
			if d.Action == ActionHold {
				return fmt.Sprintf("holding %d nodes while %s waits at %s", r.state.NodesHeld, r.in.Point.PointID, r.state.Stage), nil
			}
			r.decision = &d
			msg := fmt.Sprintf("accepted %s for %s", d.Action, r.state.Stage)
			if d.Hold {
				msg += " (holding the nodes at a later gate)"
			}
			return msg, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d Decision) error {
			switch d.Action {
			case ActionRetry, ActionSkip, ActionAbort, ActionHold:
			default:
				return fmt.Errorf("unknown action %q (want retry, skip, abort or hold)", d.Action)
			}
			if !r.waiting || r.decision != nil {
				return fmt.Errorf("point %s is not waiting for an operator (status %s)", r.in.Point.PointID, r.state.Status)
			}
			if d.Action == ActionHold && r.state.Released {
				return fmt.Errorf("point %s already released its nodes; `retry --hold` allocates again and keeps them", r.in.Point.PointID)
			}
			if d.Action == ActionHold && !r.allocated {
				return fmt.Errorf("point %s holds no nodes at %s: there is nothing to hold", r.in.Point.PointID, r.state.Stage)
			}
			return nil
		}})
}

func (r *pointRun) run(ctx workflow.Context) error {
	p := r.in.Point
	if g := r.in.Deployment; g != nil {
		r.handBack = g.HandBack
		if g.Lease != nil {
			r.adopt(g.Lease)
		}
		// Whatever happens, the nodes this point still holds at the end go
		// to the next point (success) or are torn down.
		defer func() {
			if r.allocated {
				r.teardown(ctx)
			}
		}()
	}
	var reused activities.Reused
	if len(r.in.ReuseFrom) > 0 {
		lctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, r.in.TaskQueue, r.in.Tuning))
		req := activities.ReuseRequest{Point: p, Stages: point.ReusableStages(), FromSweeps: r.in.ReuseFrom}
		if err := workflow.ExecuteActivity(lctx, r.acts.LookupReuse, req).Get(ctx, &reused); err != nil {
			return err
		}
		r.state.ReuseNotes = reused.Notes
	}
	if reused.Perf != nil && !r.forced(point.StagePerf) {
		r.state.Perf = reused.Perf
		r.markReused(ctx, point.StagePerf, reused.PerfSweep, reused.PerfRun)
	}
	if reused.Eval != nil && p.Eval && !r.forced(point.StageEval) {
		r.state.Eval = reused.Eval
		r.markReused(ctx, point.StageEval, reused.EvalSweep, reused.EvalRun)
	}
	// An eval-only point (InferenceX's EVAL_ONLY rows) has no perf stage.
	needPerf := r.state.Perf == nil && !p.Profile.EvalOnly
	needEval := p.Eval && r.state.Eval == nil

	if needPerf || needEval {
		// Teardown runs whatever happens next, also when the point is
		// cancelled: a disconnected context survives the cancellation.
		defer func() {
			if r.allocated {
				r.teardown(ctx)
			}
		}()
		for {
			stop, err := r.onAllocation(ctx, needPerf, needEval)
			if isAllocationReleased(err) && ctx.Err() == nil {
				// The nodes went back while the point waited for an operator;
				// allocate again if a stage still needs them.
				if !r.needNodes(needPerf, needEval) {
					break
				}
				workflow.GetLogger(ctx).Info("re-allocating after the operator's decision", "point", p.PointID)
				continue
			}
			if isAllocationLost(err) && ctx.Err() == nil {
				// Node failure, preemption or an external cancel: release
				// what is left and start again on a fresh allocation; the
				// stages already done (perf) are not repeated.
				r.reallocations++
				workflow.GetLogger(ctx).Warn("allocation lost, re-allocating", "point", p.PointID, "error", RootMessage(err))
				r.teardown(ctx)
				continue
			}
			if err != nil || stop {
				return err
			}
			break
		}
	}
	if r.in.Deployment != nil && r.handBack && r.allocated {
		r.state.Handoff = r.lease()
		r.allocated, r.endpoint, r.state.NodesHeld = false, nil, 0
	}
	if r.allocated {
		r.teardown(ctx) // the upload needs no node: a slow one holds no GPUs
	}

	up := activities.UploadInput{Point: p, Perf: r.state.Perf, Eval: r.state.Eval}
	up.Point.WarmupSkipped = r.warmupSkipped() && r.state.Perf != nil && !slices.Contains(r.state.Reused, point.StagePerf)
	if reused.PerfSweep != "" && slices.Contains(r.state.Reused, point.StagePerf) {
		up.PerfFrom = &activities.ReuseSource{Sweep: reused.PerfSweep, Run: reused.PerfRun}
	}
	if reused.EvalSweep != "" && slices.Contains(r.state.Reused, point.StageEval) {
		up.EvalFrom = &activities.ReuseSource{Sweep: reused.EvalSweep, Run: reused.EvalRun}
	}
	_, err := r.stage(ctx, point.StageUpload, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.Upload, up).Get(actx, nil)
	})
	return err
}

// onAllocation allocates nodes and runs the stages that need them. stop
// reports that the operator skipped a stage that ends the point.
func (r *pointRun) onAllocation(ctx workflow.Context, needPerf, needEval bool) (stop bool, err error) {
	p := r.in.Point
	perfToDo := needPerf && r.state.Perf == nil && !r.skippedBefore(point.StagePerf)
	var in activities.StageInput
	// A point whose only stage on the nodes is a deferred eval takes them
	// in the group's eval phase.
	if perfToDo || !r.deferringEval() {
		if in, stop, err = r.acquire(ctx); err != nil || stop {
			return true, err
		}
	}
	if perfToDo {
		// A shared server started for perf (the golden AL in its
		// environment) serves this point's perf run as it is.
		if in.Endpoint == nil || (p.SyntheticAL > 0 && in.Endpoint.Mode != "perf") {
			if r.in.Deployment != nil && r.in.Deployment.Added {
				return true, addedNoServer(p, "the handed-over server is not up in perf mode")
			}
			if ok, err := r.bringUp(ctx, &in, "perf"); err != nil || !ok {
				return true, err
			}
		} else {
			r.markShared(ctx, point.StageBringUp)
		}
		if _, err := r.stage(ctx, point.StageWarmup, func(actx workflow.Context) error {
			return workflow.ExecuteActivity(actx, r.acts.Warmup, in).Get(actx, nil)
		}); err != nil {
			return true, err
		}
		var perf point.PerfSummary
		pin := in
		pin.Point.WarmupSkipped = r.warmupSkipped()
		skipped, err := r.stage(ctx, point.StagePerf, func(actx workflow.Context) error {
			return workflow.ExecuteActivity(actx, r.acts.Perf, pin).Get(actx, &perf)
		})
		if err != nil {
			return true, err
		}
		if !skipped {
			r.state.Perf = &perf
		}
	}
	if needEval && r.state.Eval == nil && !r.skippedBefore(point.StageEval) {
		if r.deferringEval() {
			// Every perf run of the deployment comes first: hand the server
			// over and wait for the group's eval phase.
			if in, stop, err = r.awaitEvalTurn(ctx); err != nil || stop {
				return true, err
			}
		}
		// The eval runs with real draft verification: a server started
		// with synthetic acceptance for perf is restarted without it.
		if in.Endpoint == nil || (p.SyntheticAL > 0 && in.Endpoint.Mode != "eval") {
			if ok, err := r.bringUp(ctx, &in, "eval"); err != nil || !ok {
				return true, err
			}
		}
		var ev point.EvalSummary
		skipped, err := r.stage(ctx, point.StageEval, func(actx workflow.Context) error {
			return workflow.ExecuteActivity(actx, r.acts.Eval, in).Get(actx, &ev)
		})
		if err != nil {
			return true, err
		}
		if !skipped {
			r.state.Eval = &ev
		}
	}
	return false, nil
}

// maxReallocations bounds how often a point starts over on fresh nodes after
// losing its allocation; past it the loss goes to the operator gate.
const maxReallocations = 3

// isAllocationLost: the stage failed because the nodes are gone.
func isAllocationLost(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && failure.ErrorType(app.Type()) == failure.ErrAllocationLost
}

// isAllocationReleased: the point released its nodes while it waited for an
// operator, who then chose to go on.
func isAllocationReleased(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && failure.ErrorType(app.Type()) == failure.ErrAllocationReleased
}

// needNodes reports whether a stage that runs on nodes is still to do.
func (r *pointRun) needNodes(needPerf, needEval bool) bool {
	return (needPerf && r.state.Perf == nil && !r.skippedBefore(point.StagePerf)) ||
		(needEval && r.state.Eval == nil && !r.skippedBefore(point.StageEval))
}

// warmupSkipped: an operator skipped this point's warmup, so its perf
// figures come from a cold server and are stored as such.
func (r *pointRun) warmupSkipped() bool {
	return slices.Contains(r.state.Skipped, point.StageWarmup)
}

// skippedBefore: the operator skipped this stage earlier in the point, so a
// re-allocation does not run it again.
func (r *pointRun) skippedBefore(stage string) bool {
	return slices.Contains(r.state.Skipped, stage)
}

// nodeStage: the stage runs on the allocation (upload does not).
func nodeStage(stage string) bool {
	switch stage {
	case point.StageCheckpoint, point.StageBringUp, point.StageWarmup, point.StagePerf, point.StageEval:
		return true
	}
	return false
}

// endsPoint: skipping the stage leaves nothing after it runnable.
func endsPoint(stage string) bool {
	return stage == point.StageAllocate || stage == point.StageCheckpoint || stage == point.StageBringUp
}

// bringUp starts the server for a mode. It reports ok=false when the operator
// skipped it, which ends the point: nothing after it can run.
func (r *pointRun) bringUp(ctx workflow.Context, in *activities.StageInput, mode string) (bool, error) {
	var ep cluster.Server
	bin := *in
	bin.Mode = mode
	skipped, err := r.stage(ctx, point.StageBringUp, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.BringUp, bin).Get(actx, &ep)
	})
	if err != nil {
		return false, err
	}
	if skipped {
		return false, nil
	}
	in.Endpoint = &ep
	r.endpoint = &ep
	return true, nil
}

func (r *pointRun) forced(stage string) bool { return slices.Contains(r.in.Force, stage) }

func (r *pointRun) markReused(ctx workflow.Context, stage, fromSweep, fromRun string) {
	now := workflow.Now(ctx)
	r.state.Reused = append(r.state.Reused, stage)
	r.state.Stages = append(r.state.Stages, point.StageRun{Stage: stage, Outcome: point.OutcomeReused, Started: now, Ended: now,
		ReusedFrom: fromSweep, ReusedRun: fromRun})
}

// stage runs one stage with its retry policy; when the retries are spent it
// parks the point for an operator decision. It returns skipped=true when the
// operator chose skip.
func (r *pointRun) stage(ctx workflow.Context, name string, fn func(workflow.Context) error) (bool, error) {
	if r.skippedBefore(name) {
		// Skipped on an earlier allocation (warmup before a re-allocation).
		return true, nil
	}
	r.state.Stages = append(r.state.Stages, point.StageRun{Stage: name, Outcome: point.OutcomeRunning, Started: workflow.Now(ctx), Rounds: 1})
	idx := len(r.state.Stages) - 1
	run := &r.state.Stages[idx]
	r.state.Stage = name
	for {
		err := r.runWatchedStage(ctx, name, fn)
		if err == nil {
			run.Outcome, run.Ended = point.OutcomeOK, workflow.Now(ctx)
			return false, nil
		}
		if ctx.Err() != nil {
			run.Outcome, run.Ended = point.OutcomeCancelled, workflow.Now(ctx)
			r.state.Status = point.StatusCancelled
			return false, err
		}
		r.recordFailure(ctx, run, err)
		if name != point.StageAllocate && isAllocationLost(err) && r.reallocations < maxReallocations {
			run.Outcome, run.Ended, run.Error = point.OutcomeAllocationLost, workflow.Now(ctx), RootMessage(err)
			return false, err
		}
		run.Error = RootMessage(err)
		if pause, ok := r.infraRetry(run, err); ok {
			workflow.GetLogger(ctx).Warn("stage lost its worker or the server, retrying after a pause",
				"point", r.in.Point.PointID, "stage", name, "error", run.Error, "pause", pause, "auto_retry", run.AutoRetries)
			if serr := workflow.Sleep(ctx, pause); serr != nil {
				run.Outcome, run.Ended = point.OutcomeCancelled, workflow.Now(ctx)
				r.state.Status = point.StatusCancelled
				return false, serr
			}
			continue
		}
		r.state.LastError = run.Error
		r.state.FailedStage = name
		r.state.Status = point.StatusAwaitingOperator
		r.waiting = true
		r.publish(ctx)
		workflow.GetLogger(ctx).Warn("stage out of retries, waiting for operator",
			"point", r.in.Point.PointID, "stage", name, "error", run.Error)

		got, werr := r.awaitOperator(ctx)
		// A release appended the teardown to Stages: find the run again.
		run = &r.state.Stages[idx]
		r.waiting = false
		if werr != nil || ctx.Err() != nil {
			run.Outcome, run.Ended = point.OutcomeCancelled, workflow.Now(ctx)
			r.state.Status = point.StatusCancelled
			if werr == nil {
				werr = ctx.Err()
			}
			return false, werr
		}
		d := Decision{Action: ActionAbort, Reason: "operator timeout"}
		if got {
			d = *r.decision
		}
		r.decision = nil
		// The nodes went back during the wait: the stages that run on them
		// go on after a fresh allocation (run re-allocates).
		reallocate := r.state.Released && nodeStage(name)
		switch d.Action {
		case ActionRetry:
			run.Rounds++
			r.state.Status = point.StatusRunning
			r.state.FailedStage = ""
			if reallocate {
				run.Outcome, run.Ended = point.OutcomeReleased, workflow.Now(ctx)
				r.publish(ctx)
				return false, temporal.NewApplicationError("nodes released while waiting for the operator", string(failure.ErrAllocationReleased))
			}
			r.publish(ctx)
			continue
		case ActionSkip:
			run.Outcome, run.Ended = point.OutcomeSkipped, workflow.Now(ctx)
			if !slices.Contains(r.state.Skipped, name) {
				r.state.Skipped = append(r.state.Skipped, name)
			}
			r.state.Status = point.StatusRunning
			r.state.FailedStage = ""
			r.publish(ctx)
			if reallocate && !endsPoint(name) {
				return true, temporal.NewApplicationError("nodes released while waiting for the operator", string(failure.ErrAllocationReleased))
			}
			return true, nil
		default:
			run.Outcome, run.Ended = point.OutcomeAborted, workflow.Now(ctx)
			r.state.Status = point.StatusAborted
			if d.Reason != "" {
				r.state.LastError = fmt.Sprintf("%s (abort: %s)", run.Error, d.Reason)
			}
			return false, fmt.Errorf("aborted at %s: %s", name, r.state.LastError)
		}
	}
}

// recordFailure adds a failed attempt, with its class and evidence, to the
// stage run and makes it the point's latest failure.
func (r *pointRun) recordFailure(ctx workflow.Context, run *point.StageRun, err error) {
	f := FailureOf(err)
	run.Failures = append(run.Failures, failure.Attempt{Failure: f, At: workflow.Now(ctx)})
	r.state.FailureClass, r.state.FailureExcerpt = string(f.Class), f.Excerpt
}

// autoRetries is how many fresh retry budgets a stage gets by itself after
// a heartbeat timeout, before it waits for an operator.
const autoRetries = 3

// infraRetry decides whether a stage out of retries tries again by itself
// (rather than asking an operator): its last attempt timed out on heartbeats, so no worker or
// no server was reachable for the heartbeat timeout (a killed worker, a cut
// network, a server restart or a host too loaded to answer in time), which
// says nothing about the engine. The pause (10 retry intervals, doubling)
// gives the fault time to pass, and the nodes stay allocated: a 30 s
// network cut must not cost a 16-node allocation its operator gate and node
// hold. Any other error, or a fourth heartbeat timeout, goes to the operator.
func (r *pointRun) infraRetry(run *point.StageRun, err error) (time.Duration, bool) {
	var to *temporal.TimeoutError
	if run.AutoRetries >= autoRetries || !errors.As(err, &to) ||
		to.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
		return 0, false
	}
	pause := 10 * r.in.Tuning.retryInterval() << run.AutoRetries
	run.AutoRetries++
	return pause, true
}

// awaitOperator parks the point until an operator decides or the operator
// timeout passes (got=false). Past Tuning.NodeHold it releases the nodes,
// unless the operator asked to hold them.
func (r *pointRun) awaitOperator(ctx workflow.Context) (bool, error) {
	decided := func() bool { return r.decision != nil }
	timeout := r.in.Tuning.operatorTimeout()
	hold := r.in.Tuning.nodeHold()
	if !r.allocated || hold < 0 || hold >= timeout || r.state.Hold {
		return workflow.AwaitWithTimeout(ctx, timeout, decided)
	}
	start := workflow.Now(ctx)
	got, err := workflow.AwaitWithTimeout(ctx, hold, decided)
	if got || err != nil || ctx.Err() != nil {
		return got, err
	}
	if r.state.Hold {
		// `starter hold` during the wait: keep waiting on the nodes.
		return r.awaitRest(ctx, start, timeout, decided)
	}
	workflow.GetLogger(ctx).Info("releasing nodes while waiting for an operator",
		"point", r.in.Point.PointID, "stage", r.state.Stage, "hold", hold)
	r.teardown(ctx)
	r.state.Released = true
	r.publish(ctx)
	return r.awaitRest(ctx, start, timeout, decided)
}

// awaitRest waits for a decision until the operator timeout counted from start.
func (r *pointRun) awaitRest(ctx workflow.Context, start time.Time, timeout time.Duration, decided func() bool) (bool, error) {
	left := timeout - workflow.Now(ctx).Sub(start)
	if left <= 0 {
		return decided(), nil
	}
	return workflow.AwaitWithTimeout(ctx, left, decided)
}

// teardown releases the current allocation, also after a cancellation.
func (r *pointRun) teardown(ctx workflow.Context) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	tctx := workflow.WithActivityOptions(dctx, ActivityOptions(point.StageTeardown, r.in.TaskQueue, r.in.Tuning))
	start := workflow.Now(dctx)
	err := workflow.ExecuteActivity(tctx, r.acts.Teardown, activities.StageInput{Point: r.in.Point, Alloc: r.alloc}).Get(tctx, nil)
	run := point.StageRun{Stage: point.StageTeardown, Outcome: point.OutcomeOK, Started: start, Ended: workflow.Now(dctx), Rounds: 1}
	if err != nil {
		run.Outcome, run.Error = point.OutcomeFailed, RootMessage(err)
		workflow.GetLogger(ctx).Error("teardown failed", "point", r.in.Point.PointID, "error", err)
	}
	r.state.Stages = append(r.state.Stages, run)
	r.allocated, r.state.NodesHeld, r.endpoint = false, 0, nil
}

// finish settles the final status and records it in the ledger, also after a
// cancellation.
func (r *pointRun) finish(ctx workflow.Context, err error) {
	r.state.Missing = r.missing()
	switch {
	case err == nil && (len(r.state.Skipped) > 0 || len(r.state.Missing) > 0):
		// An operator skipped a stage: the point lacks what it would
		// have produced, whatever its eval verdict.
		r.state.Status = point.StatusIncomplete
	case err == nil && r.state.Eval != nil && !r.state.Eval.Passed:
		r.state.Status = point.StatusEvalFailed
	case err == nil:
		r.state.Status = point.StatusCompleted
	case ctx.Err() != nil:
		r.state.Status = point.StatusCancelled
	case r.state.Status != point.StatusAborted:
		r.state.Status = point.StatusFailed
	}
	if err != nil && r.state.FailedStage == "" {
		r.state.FailedStage = r.state.Stage
	}
	if err == nil {
		r.state.Stage = "done"
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	r.publish(dctx)
	lctx := workflow.WithActivityOptions(dctx, ActivityOptions(stageLedger, r.in.TaskQueue, r.in.Tuning))
	rec := activities.PointRecord{Point: r.in.Point, Status: r.state.Status, FailedStage: r.state.FailedStage,
		Error: r.state.LastError, At: workflow.Now(dctx)}
	for _, s := range r.state.Stages {
		rec.Stages = append(rec.Stages, point.StageRun{Stage: s.Stage, Outcome: s.Outcome, Rounds: s.Rounds,
			Error: s.Error, Failures: s.Failures, Started: s.Started, Ended: s.Ended})
	}
	lerr := workflow.ExecuteActivity(lctx, r.acts.RecordPoint, rec).Get(lctx, nil)
	// A record out of retries tries again after a pause (the
	// database may be restarting), then the failure is the point's: the
	// ledger would otherwise keep a stale status without anyone knowing.
	for round := 0; lerr != nil && round < autoRetries && !isNonRetryable(lerr); round++ {
		workflow.GetLogger(ctx).Warn("recording point status failed, retrying after a pause", "point", r.in.Point.PointID, "error", lerr)
		if serr := workflow.Sleep(dctx, 10*r.in.Tuning.retryInterval()<<round); serr != nil {
			break
		}
		rec.At = workflow.Now(dctx)
		lerr = workflow.ExecuteActivity(lctx, r.acts.RecordPoint, rec).Get(lctx, nil)
	}
	if lerr != nil {
		workflow.GetLogger(ctx).Error("recording point status failed", "point", r.in.Point.PointID, "error", lerr)
		r.state.RecordError = RootMessage(lerr)
		r.publish(dctx)
	}
}

// isNonRetryable: an application error no retry can fix.
func isNonRetryable(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}

// missing lists the planned outputs the point does not have: perf, eval (when
// planned) and the upload of the results, which produce or reuse them.
func (r *pointRun) missing() []string {
	var out []string
	if r.state.Perf == nil && !r.in.Point.Profile.EvalOnly {
		out = append(out, point.StagePerf)
	}
	if r.in.Point.Eval && r.state.Eval == nil {
		out = append(out, point.StageEval)
	}
	if !slices.ContainsFunc(r.state.Stages, func(s point.StageRun) bool {
		return s.Stage == point.StageUpload && s.Outcome == point.OutcomeOK
	}) {
		out = append(out, point.StageUpload)
	}
	return out
}

// runWatchedStage runs one attempt round of a stage. A status change is
// published at once; the stage name is left to watchStages, which writes it
// when the round still runs after stageAttrDelay: no timer of its own.
func (r *pointRun) runWatchedStage(ctx workflow.Context, name string, fn func(workflow.Context) error) error {
	r.stageSeq++
	r.stageSince, r.stageRunning = workflow.Now(ctx), true
	defer func() { r.stageRunning = false }()
	r.showRound(ctx)
	return fn(workflow.WithActivityOptions(ctx, ActivityOptions(name, r.in.TaskQueue, r.in.Tuning)))
}

// showRound shows a starting stage round: a status change is written at
// once, otherwise only the Web UI's details change.
func (r *pointRun) showRound(ctx workflow.Context) {
	if r.state.Status != r.publishedStatus {
		r.publish(ctx)
	} else {
		r.setDetails(ctx)
	}
}

// watchStages writes the running stage's name into the Stage attribute once
// that stage round has run stageAttrDelay. One timer at a time serves the
// whole point: it is set when a stage starts and none is pending, and on
// firing it waits out what is left of the stage running then. Quick stages
// thus share one timer, which the point cancels at its end.
func (r *pointRun) watchStages(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return r.stageRunning && r.publishedSeq != r.stageSeq }); err != nil {
			return
		}
		if wait := r.stageSince.Add(stageAttrDelay).Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return
			}
			continue // the stage running now may have started later
		}
		r.publish(ctx)
	}
}

// publish mirrors the point's stage and status into search attributes and the
// current details shown in the Web UI.
func (r *pointRun) publish(ctx workflow.Context) {
	updates := []temporal.SearchAttributeUpdate{
		temporalx.SAStage.ValueSet(r.state.Stage),
		temporalx.SAPointStatus.ValueSet(r.state.Status),
	}
	// Only a point that met a failure carries FailureClass; it rides on
	// this upsert, never one of its own, so the command sequence of every
	// recorded history stays as it was.
	if r.state.FailureClass != "" {
		updates = append(updates, temporalx.SAFailureClass.ValueSet(r.state.FailureClass))
	}
	// The power verdict rides on the same upsert, as FailureClass does.
	if pw := r.powerFigures(); pw != nil {
		switch {
		case !pw.Valid:
			updates = append(updates, temporalx.SAPower.ValueSet("invalid"))
		case pw.Simulated:
			updates = append(updates, temporalx.SAPower.ValueSet("simulated"), temporalx.SAJoulesPerOutputToken.ValueSet(pw.JoulesPerOutputToken))
		default:
			updates = append(updates, temporalx.SAPower.ValueSet("valid"), temporalx.SAJoulesPerOutputToken.ValueSet(pw.JoulesPerOutputToken))
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, updates...)
	r.publishedStatus = r.state.Status
	r.publishedSeq = r.stageSeq
	r.setDetails(ctx)
}

// powerFigures are the point's power figures once perf stored them.
func (r *pointRun) powerFigures() *energy.Figures {
	if r.state.Perf == nil {
		return nil
	}
	return r.state.Perf.Power
}

// setDetails is the Web UI's current details of the point (read on query,
// no history event).
func (r *pointRun) setDetails(ctx workflow.Context) {
	details := fmt.Sprintf("**%s** — stage `%s`, status `%s`", r.in.Point.PointID, r.state.Stage, r.state.Status)
	if r.state.LastError != "" && r.state.Status == point.StatusAwaitingOperator {
		if r.state.FailureClass != "" {
			details += "\n\nfailure class: `" + r.state.FailureClass + "` — " + r.state.FailureExcerpt
		}
		details += "\n\nlast error: " + r.state.LastError + "\n\n`starter retry|skip|abort " + r.state.WorkflowID + "`"
		if r.state.Released {
			details += "\n\nnodes released while waiting: retry allocates again"
		} else if !r.state.Hold && r.allocated {
			details += "\n\nthe nodes are released after the node hold; `starter hold " + r.state.WorkflowID + "` keeps them"
		}
	}
	if len(r.state.Skipped) > 0 {
		details += "\n\nskipped by the operator: " + strings.Join(r.state.Skipped, ", ")
	}
	workflow.SetCurrentDetails(ctx, details)
}
