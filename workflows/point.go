package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
)

// Names of the point workflow's message handlers.
const (
	QueryState   = "state"
	UpdateDecide = "decide"
)

// Operator actions accepted by the decide update.
const (
	ActionRetry = "retry"
	ActionSkip  = "skip"
	ActionAbort = "abort"
)

// ErrPointAborted is the application error type of a point that an operator
// (or the operator timeout) aborted.
const ErrPointAborted = "PointAborted"

// PointInput starts one point workflow.
type PointInput struct {
	Point     activities.PointSpec `json:"point"`
	TaskQueue string               `json:"task_queue"` // the cluster's activity queue
	Tuning    Tuning               `json:"tuning"`
	// ReuseFrom lists sweeps whose durable stage outputs may stand in for this
	// point's when identity and measurement profile match (rerun, --reuse-from).
	ReuseFrom []string `json:"reuse_from,omitempty"`
	// Force names stages that rerun even when a reusable output exists.
	Force []string `json:"force,omitempty"`
}

// Decision is the argument of the decide update.
type Decision struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// StageRun records one stage of a point as operators see it.
type StageRun struct {
	Stage   string    `json:"stage"`
	Outcome string    `json:"outcome"` // running | ok | failed | skipped | reused | aborted | cancelled
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitempty"`
	// Rounds counts operator retries: round 1 is the first retry budget.
	Rounds int    `json:"rounds"`
	Error  string `json:"error,omitempty"`
	// ReusedFrom and ReusedRun name the sweep and run a reused output was
	// measured in.
	ReusedFrom string `json:"reused_from,omitempty"`
	ReusedRun  string `json:"reused_run,omitempty"`
}

// PointState answers the state query and is the point's final result.
type PointState struct {
	PointID     string                  `json:"point_id"`
	WorkflowID  string                  `json:"workflow_id"`
	Status      string                  `json:"status"`
	Stage       string                  `json:"stage"`
	FailedStage string                  `json:"failed_stage,omitempty"`
	LastError   string                  `json:"last_error,omitempty"`
	Stages      []StageRun              `json:"stages"`
	Perf        *activities.PerfSummary `json:"perf,omitempty"`
	Eval        *activities.EvalSummary `json:"eval,omitempty"`
	Reused      []string                `json:"reused,omitempty"`
	// ReuseNotes say why a durable stage was not reused on a rerun.
	ReuseNotes []string `json:"reuse_notes,omitempty"`
}

type pointRun struct {
	in       PointInput
	acts     *activities.Activities
	state    PointState
	waiting  bool
	decision *Decision
	// reallocations counts fresh allocations after a lost one.
	reallocations int
}

// PointWorkflow runs the stages of one sweep point on one allocation:
// allocate, checkpoint staging, bring-up, warmup, perf, GSM8K eval, upload,
// and always teardown. A stage that is out of retries waits for an operator.
func PointWorkflow(ctx workflow.Context, in PointInput) (*PointState, error) {
	r := &pointRun{in: in}
	r.state = PointState{
		PointID:    in.Point.PointID,
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		Status:     StatusRunning,
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	err := r.run(ctx)
	r.finish(ctx, err)
	// Let an in-flight decide update reply before the workflow closes.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if err != nil {
		var canceled *temporal.CanceledError
		if errors.As(err, &canceled) || ctx.Err() != nil {
			return &r.state, err
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("point %s %s at stage %s: %v", in.Point.PointID, r.state.Status, r.state.FailedStage, err),
			ErrPointAborted, err, r.state)
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
			r.decision = &d
			return fmt.Sprintf("accepted %s for %s", d.Action, r.state.Stage), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d Decision) error {
			switch d.Action {
			case ActionRetry, ActionSkip, ActionAbort:
			default:
				return fmt.Errorf("unknown action %q (want retry, skip or abort)", d.Action)
			}
			if !r.waiting || r.decision != nil {
				return fmt.Errorf("point %s is not waiting for an operator (status %s)", r.in.Point.PointID, r.state.Status)
			}
			return nil
		}})
}

func (r *pointRun) run(ctx workflow.Context) error {
	p := r.in.Point
	var reused activities.Reused
	if len(r.in.ReuseFrom) > 0 {
		lctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, r.in.TaskQueue, r.in.Tuning))
		req := activities.ReuseRequest{Point: p, Stages: activities.DurableStages, FromSweeps: r.in.ReuseFrom}
		if err := workflow.ExecuteActivity(lctx, r.acts.LookupReuse, req).Get(ctx, &reused); err != nil {
			return err
		}
		r.state.ReuseNotes = reused.Notes
	}
	if reused.Perf != nil && !r.forced(activities.StagePerf) {
		r.state.Perf = reused.Perf
		r.markReused(ctx, activities.StagePerf, reused.PerfSweep, reused.PerfRun)
	}
	if reused.Eval != nil && p.Eval && !r.forced(activities.StageEval) {
		r.state.Eval = reused.Eval
		r.markReused(ctx, activities.StageEval, reused.EvalSweep, reused.EvalRun)
	}
	needPerf := r.state.Perf == nil
	needEval := p.Eval && r.state.Eval == nil

	if needPerf || needEval {
		var alloc activities.Allocation
		allocated := false
		// Teardown runs whatever happens next, also when the point is
		// cancelled: a disconnected context survives the cancellation.
		defer func() {
			if allocated {
				r.teardown(ctx, alloc)
			}
		}()
		for {
			stop, err := r.onAllocation(ctx, &alloc, &allocated, needPerf, needEval)
			if isAllocationLost(err) && ctx.Err() == nil {
				// Node failure, preemption or an external cancel: release
				// what is left and start again on a fresh allocation; the
				// stages already done (perf) are not repeated.
				r.reallocations++
				workflow.GetLogger(ctx).Warn("allocation lost, re-allocating", "point", p.PointID, "error", rootMessage(err))
				r.teardown(ctx, alloc)
				allocated = false
				continue
			}
			if err != nil || stop {
				return err
			}
			break
		}
	}

	up := activities.UploadInput{Point: p, Perf: r.state.Perf, Eval: r.state.Eval}
	if reused.PerfSweep != "" && slices.Contains(r.state.Reused, activities.StagePerf) {
		up.ReusedFrom = append(up.ReusedFrom, reused.PerfSweep)
		up.PerfFrom = &activities.ReuseSource{Sweep: reused.PerfSweep, Run: reused.PerfRun}
	}
	if reused.EvalSweep != "" && slices.Contains(r.state.Reused, activities.StageEval) {
		if reused.EvalSweep != reused.PerfSweep {
			up.ReusedFrom = append(up.ReusedFrom, reused.EvalSweep)
		}
		up.EvalFrom = &activities.ReuseSource{Sweep: reused.EvalSweep, Run: reused.EvalRun}
	}
	_, err := r.stage(ctx, activities.StageUpload, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.Upload, up).Get(actx, nil)
	})
	return err
}

// onAllocation allocates nodes and runs the stages that need them. stop
// reports that the operator skipped a stage that ends the point.
func (r *pointRun) onAllocation(ctx workflow.Context, alloc *activities.Allocation, allocated *bool, needPerf, needEval bool) (stop bool, err error) {
	p := r.in.Point
	skipped, err := r.stage(ctx, activities.StageAllocate, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.Allocate, p).Get(actx, alloc)
	})
	if err != nil || skipped {
		return true, err
	}
	*allocated = true

	in := activities.StageInput{Point: p, Alloc: *alloc}
	var ck activities.CheckpointOutput
	if skipped, err := r.stage(ctx, activities.StageCheckpoint, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.StageCheckpoint, in).Get(actx, &ck)
	}); err != nil || skipped {
		return true, err
	}
	if needPerf && r.state.Perf == nil {
		if ok, err := r.bringUp(ctx, &in, "perf"); err != nil || !ok {
			return true, err
		}
		if _, err := r.stage(ctx, activities.StageWarmup, func(actx workflow.Context) error {
			return workflow.ExecuteActivity(actx, r.acts.Warmup, in).Get(actx, nil)
		}); err != nil {
			return true, err
		}
		var perf activities.PerfSummary
		skipped, err := r.stage(ctx, activities.StagePerf, func(actx workflow.Context) error {
			return workflow.ExecuteActivity(actx, r.acts.Perf, in).Get(actx, &perf)
		})
		if err != nil {
			return true, err
		}
		if !skipped {
			r.state.Perf = &perf
		}
	}
	if needEval && r.state.Eval == nil {
		// The eval runs with real draft verification: a server started
		// with synthetic acceptance for perf is restarted without it.
		if in.Endpoint == nil || (p.SyntheticAL > 0 && in.Endpoint.Mode != "eval") {
			if ok, err := r.bringUp(ctx, &in, "eval"); err != nil || !ok {
				return true, err
			}
		}
		var ev activities.EvalSummary
		skipped, err := r.stage(ctx, activities.StageEval, func(actx workflow.Context) error {
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
	return errors.As(err, &app) && app.Type() == "AllocationLost"
}

// bringUp starts the server for a mode. It reports ok=false when the operator
// skipped it, which ends the point: nothing after it can run.
func (r *pointRun) bringUp(ctx workflow.Context, in *activities.StageInput, mode string) (bool, error) {
	var ep activities.Endpoint
	bin := *in
	bin.Mode = mode
	skipped, err := r.stage(ctx, activities.StageBringUp, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.BringUp, bin).Get(actx, &ep)
	})
	if err != nil {
		return false, err
	}
	if skipped {
		r.state.Status = StatusSkipped
		return false, nil
	}
	in.Endpoint = &ep
	return true, nil
}

func (r *pointRun) forced(stage string) bool { return slices.Contains(r.in.Force, stage) }

func (r *pointRun) markReused(ctx workflow.Context, stage, fromSweep, fromRun string) {
	now := workflow.Now(ctx)
	r.state.Reused = append(r.state.Reused, stage)
	r.state.Stages = append(r.state.Stages, StageRun{Stage: stage, Outcome: "reused", Started: now, Ended: now,
		ReusedFrom: fromSweep, ReusedRun: fromRun})
}

// stage runs one stage with its retry policy; when the retries are spent it
// parks the point for an operator decision. It returns skipped=true when the
// operator chose skip.
func (r *pointRun) stage(ctx workflow.Context, name string, fn func(workflow.Context) error) (bool, error) {
	actx := workflow.WithActivityOptions(ctx, ActivityOptions(name, r.in.TaskQueue, r.in.Tuning))
	r.state.Stages = append(r.state.Stages, StageRun{Stage: name, Outcome: "running", Started: workflow.Now(ctx), Rounds: 1})
	run := &r.state.Stages[len(r.state.Stages)-1]
	r.state.Stage = name
	r.publish(ctx)
	for {
		err := fn(actx)
		if err == nil {
			run.Outcome, run.Ended = "ok", workflow.Now(ctx)
			return false, nil
		}
		if ctx.Err() != nil {
			run.Outcome, run.Ended = "cancelled", workflow.Now(ctx)
			r.state.Status = StatusCancelled
			return false, err
		}
		if name != activities.StageAllocate && isAllocationLost(err) && r.reallocations < maxReallocations {
			run.Outcome, run.Ended, run.Error = "allocation lost", workflow.Now(ctx), rootMessage(err)
			return false, err
		}
		run.Error = rootMessage(err)
		r.state.LastError = run.Error
		r.state.FailedStage = name
		r.state.Status = StatusAwaitingOperator
		r.waiting = true
		r.publish(ctx)
		workflow.GetLogger(ctx).Warn("stage out of retries, waiting for operator",
			"point", r.in.Point.PointID, "stage", name, "error", run.Error)

		got, werr := workflow.AwaitWithTimeout(ctx, r.in.Tuning.operatorTimeout(), func() bool { return r.decision != nil })
		r.waiting = false
		if werr != nil || ctx.Err() != nil {
			run.Outcome, run.Ended = "cancelled", workflow.Now(ctx)
			r.state.Status = StatusCancelled
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
		switch d.Action {
		case ActionRetry:
			run.Rounds++
			r.state.Status = StatusRunning
			r.state.FailedStage = ""
			r.publish(ctx)
			continue
		case ActionSkip:
			run.Outcome, run.Ended = "skipped", workflow.Now(ctx)
			r.state.Status = StatusRunning
			r.state.FailedStage = ""
			r.publish(ctx)
			return true, nil
		default:
			run.Outcome, run.Ended = "aborted", workflow.Now(ctx)
			r.state.Status = StatusAborted
			if d.Reason != "" {
				r.state.LastError = fmt.Sprintf("%s (abort: %s)", run.Error, d.Reason)
			}
			return false, fmt.Errorf("aborted at %s: %s", name, r.state.LastError)
		}
	}
}

func (r *pointRun) teardown(ctx workflow.Context, alloc activities.Allocation) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	tctx := workflow.WithActivityOptions(dctx, ActivityOptions(activities.StageTeardown, r.in.TaskQueue, r.in.Tuning))
	start := workflow.Now(dctx)
	err := workflow.ExecuteActivity(tctx, r.acts.Teardown, activities.StageInput{Point: r.in.Point, Alloc: alloc}).Get(tctx, nil)
	run := StageRun{Stage: activities.StageTeardown, Outcome: "ok", Started: start, Ended: workflow.Now(dctx), Rounds: 1}
	if err != nil {
		run.Outcome, run.Error = "failed", rootMessage(err)
		workflow.GetLogger(ctx).Error("teardown failed", "point", r.in.Point.PointID, "error", err)
	}
	r.state.Stages = append(r.state.Stages, run)
}

// finish settles the final status and records it in the ledger, also after a
// cancellation.
func (r *pointRun) finish(ctx workflow.Context, err error) {
	switch {
	case err == nil && r.state.Status == StatusSkipped:
	case err == nil && r.state.Eval != nil && !r.state.Eval.Passed:
		r.state.Status = StatusEvalFailed
	case err == nil:
		r.state.Status = StatusCompleted
	case ctx.Err() != nil:
		r.state.Status = StatusCancelled
	case r.state.Status != StatusAborted:
		r.state.Status = StatusFailed
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
		rec.Stages = append(rec.Stages, activities.StageTiming{Stage: s.Stage, Outcome: s.Outcome, Rounds: s.Rounds,
			Error: s.Error, Started: s.Started, Ended: s.Ended})
	}
	if lerr := workflow.ExecuteActivity(lctx, r.acts.RecordPoint, rec).Get(lctx, nil); lerr != nil {
		workflow.GetLogger(ctx).Error("recording point status failed", "point", r.in.Point.PointID, "error", lerr)
	}
}

// publish mirrors the point's stage and status into search attributes and the
// current details shown in the Web UI.
func (r *pointRun) publish(ctx workflow.Context) {
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		SAStage.ValueSet(r.state.Stage),
		SAPointStatus.ValueSet(r.state.Status))
	details := fmt.Sprintf("**%s** — stage `%s`, status `%s`", r.in.Point.PointID, r.state.Stage, r.state.Status)
	if r.state.LastError != "" && r.state.Status == StatusAwaitingOperator {
		details += "\n\nlast error: " + r.state.LastError + "\n\n`starter retry|skip|abort " + r.state.WorkflowID + "`"
	}
	workflow.SetCurrentDetails(ctx, details)
}

// rootMessage digs the activity's own message out of Temporal's wrappers.
func rootMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Error()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timeout: " + to.TimeoutType().String()
	}
	return err.Error()
}
