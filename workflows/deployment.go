package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// Signals between a DeploymentWorkflow and its points.
const (
	// SignalPerfDone: a point whose eval waits for the group's eval phase
	// hands its allocation and server back after its perf run.
	SignalPerfDone = "deployment-perf-done"
	// SignalEvalTurn: the group hands such a point the allocation for its
	// eval, once every perf run of the deployment is done.
	SignalEvalTurn = "deployment-eval-turn"
)

// KindDeployment is the SweepflowKind of a DeploymentWorkflow.
const KindDeployment = "deployment"

// Lease is an allocation (and the server running on it, if any) passed from
// one point of a deployment to the next.
type Lease struct {
	Alloc    cluster.Allocation `json:"alloc"`
	Endpoint *cluster.Server    `json:"endpoint,omitempty"`
	// From is the point that held it last.
	From string `json:"from"`
}

// DeploymentRole is a point's place in its deployment group.
type DeploymentRole struct {
	// Workflow is the DeploymentWorkflow's ID (perf-done goes there).
	Workflow string `json:"workflow"`
	// Lease is what the previous point handed over; nil: allocate.
	Lease *Lease `json:"lease,omitempty"`
	// HandBack: a later point uses the nodes, so the point returns them in
	// PointState.Handoff instead of tearing them down.
	HandBack bool `json:"hand_back"`
	// DeferEval: the point's eval waits for the group's eval phase, after
	// every perf run of the deployment.
	DeferEval bool `json:"defer_eval,omitempty"`
	// Added: an adaptive search added the point; it runs only on the
	// server handed over and never brings one up.
	Added bool `json:"added,omitempty"`
}

// PerfDone is the payload of SignalPerfDone.
type PerfDone struct {
	PointID string `json:"point_id"`
	Lease   *Lease `json:"lease,omitempty"`
	// Perf and ServerTime are what the point measured and how long it held
	// the server (warmup and perf), for an adaptive search.
	Perf       *point.PerfSummary `json:"perf,omitempty"`
	ServerTime time.Duration      `json:"server_time,omitempty"`
}

// EvalTurn is the payload of SignalEvalTurn.
type EvalTurn struct {
	Lease    *Lease `json:"lease,omitempty"`
	HandBack bool   `json:"hand_back"`
}

// DeploymentInput starts the points of one deployment.
type DeploymentInput struct {
	SweepID string `json:"sweep_id"`
	// Key is the points' point.Spec.DeploymentKey.
	Key       string       `json:"deployment"`
	Points    []point.Spec `json:"points"`
	TaskQueue string       `json:"task_queue"`
	Tuning    Tuning       `json:"tuning"`
	ReuseFrom []string     `json:"reuse_from,omitempty"`
	Force     []string     `json:"force,omitempty"`
	// Adaptive: the deployment's key has an adaptive request. Every eval
	// waits for the eval phase, and before it the deployment asks the sweep
	// workflow Sweep for points to add on its server (adaptive.go).
	Adaptive bool   `json:"adaptive,omitempty"`
	Sweep    string `json:"sweep,omitempty"`
}

// DeploymentWorkflowID is the deterministic ID of a deployment's group
// workflow in a sweep.
func DeploymentWorkflowID(sweepID, deployment string) string {
	return sweepID + "/deployment-" + deployment[:min(16, len(deployment))]
}

// PerfOrder is the order a deployment's points use the server: points
// without an eval first, then those with one, each in plan order. So every
// perf run comes before the one eval-mode restart.
func PerfOrder(pts []point.Spec) []point.Spec {
	out := slices.Clone(pts)
	slices.SortStableFunc(out, func(a, b point.Spec) int {
		switch {
		case a.Eval == b.Eval:
			return 0
		case b.Eval:
			return -1
		}
		return 1
	})
	return out
}

// DeploymentWorkflow runs the points of one deployment on one allocation
// and one bring-up: their perf runs follow one another on the same server,
// then the server restarts once in eval mode for the evals, then it is torn
// down. Every point keeps its own PointWorkflow (same ID as without
// grouping), status and ledger rows; a point that fails tears the nodes
// down and the next one allocates again.
func DeploymentWorkflow(ctx workflow.Context, in DeploymentInput) ([]PointOutcome, error) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAKind.ValueSet(KindDeployment), temporalx.SASweepID.ValueSet(in.SweepID))
	gid := workflow.GetInfo(ctx).WorkflowExecution.ID
	order := PerfOrder(in.Points)
	lastEval := -1
	for i, p := range order {
		if p.Eval {
			lastEval = i
		}
	}
	var (
		lease    *Lease
		outcomes = map[string]PointOutcome{}
		deferred []deferredEval
		search   *deploymentSearch
	)
	if in.Adaptive {
		search = &deploymentSearch{in: in, gid: gid}
	}
	perfDone := workflow.GetSignalChannel(ctx, SignalPerfDone)
	settle := func(p point.Spec, fut workflow.ChildWorkflowFuture) {
		out, st := childOutcome(ctx, p, PointWorkflowID(in.SweepID, p.PointID), fut)
		outcomes[p.PointID] = out
		lease = nil
		if st != nil {
			lease = st.Handoff
			search.report(p, st.Perf, serverTime(st.Stages))
		}
		if lease == nil {
			search.lost(out)
		}
	}
	for i, p := range order {
		if ctx.Err() != nil {
			outcomes[p.PointID] = PointOutcome{PointID: p.PointID, WorkflowID: PointWorkflowID(in.SweepID, p.PointID), Status: point.StatusCancelled}
			continue
		}
		// An eval-only point has no perf run to wait behind; in an adaptive
		// deployment every eval waits for the search.
		deferEval := p.Eval && !p.Profile.EvalOnly && (i != lastEval || in.Adaptive)
		later := i < len(order)-1 || len(deferred) > 0 || deferEval || in.Adaptive
		role := &DeploymentRole{Workflow: gid, Lease: lease, HandBack: later, DeferEval: deferEval}
		lease = nil
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: point %d of %d (%s c%d) on the shared server", in.Key, i+1, len(order), p.Topology, p.Conc))
		fut := startPoint(ctx, in.SweepID, p, PointInput{Point: p, TaskQueue: in.TaskQueue, Tuning: in.Tuning,
			ReuseFrom: in.ReuseFrom, Force: in.Force, Deployment: role})
		if !deferEval {
			settle(p, fut)
			continue
		}
		// Wait until the point hands the server back after its perf run
		// (or ends before that).
		handed, finished := false, false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(perfDone, func(c workflow.ReceiveChannel, _ bool) {
			var h PerfDone
			c.Receive(ctx, &h)
			if h.PointID != p.PointID {
				dropStalePerfDone(ctx, in, h)
				return // p still runs on the server: keep waiting for its own
			}
			lease, handed = h.Lease, true
			search.report(p, h.Perf, h.ServerTime)
		})
		sel.AddFuture(fut, func(workflow.Future) { finished = true })
		for !handed && !finished {
			sel.Select(ctx)
		}
		if finished && !handed {
			settle(p, fut)
			continue
		}
		deferred = append(deferred, deferredEval{p: p, fut: fut})
	}
	if search != nil {
		lease = search.search(ctx, lease, outcomes)
	}
	// The eval phase: one eval-mode server serves every deferred eval.
	for j, d := range deferred {
		if ctx.Err() == nil {
			turn := EvalTurn{Lease: lease, HandBack: j < len(deferred)-1}
			lease = nil
			if err := d.fut.SignalChildWorkflow(ctx, SignalEvalTurn, turn).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("eval turn not delivered", "point", d.p.PointID, "error", err)
				lease = turn.Lease
			}
		}
		settle(d.p, d.fut)
	}
	if lease != nil {
		// Nobody is left to use it (cancellation, or a point ended early).
		teardownLease(ctx, in.TaskQueue, in.Tuning, in.Points[0], lease)
	}
	// A perf-done still queued came from a point that finished first;
	// release what it handed over.
	var h PerfDone
	for perfDone.ReceiveAsync(&h) {
		dropStalePerfDone(ctx, in, h)
		h = PerfDone{}
	}
	out := make([]PointOutcome, 0, len(in.Points))
	for _, p := range in.Points {
		out = append(out, outcomes[p.PointID])
	}
	for _, p := range search.addedPoints() {
		out = append(out, outcomes[p.PointID])
	}
	if ctx.Err() != nil {
		return out, temporal.NewCanceledError(out)
	}
	return out, nil
}

// dropStalePerfDone handles a perf-done the group was not waiting for: it
// comes from a point that finished before the group took its signal (its
// completion was ready at the same time), so nobody holds what it handed
// over, which is torn down (teardown is idempotent: a point that went on
// alone after a failed signal tore it down itself).
func dropStalePerfDone(ctx workflow.Context, in DeploymentInput, h PerfDone) {
	workflow.GetLogger(ctx).Warn("dropping a perf-done of a point that already finished", "point", h.PointID)
	if h.Lease != nil {
		teardownLease(ctx, in.TaskQueue, in.Tuning, in.Points[0], h.Lease)
	}
}

type deferredEval struct {
	p   point.Spec
	fut workflow.ChildWorkflowFuture
}

// teardownLease releases an allocation no point holds any more.
func teardownLease(ctx workflow.Context, queue string, t Tuning, p point.Spec, l *Lease) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	tctx := workflow.WithActivityOptions(dctx, ActivityOptions(point.StageTeardown, queue, t))
	var a *activities.Activities
	if err := workflow.ExecuteActivity(tctx, a.Teardown, activities.StageInput{Point: p, Alloc: l.Alloc}).Get(tctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("teardown of a left-over allocation failed", "job", l.Alloc.JobID, "error", err)
	}
}

// startPoint starts a point's child workflow with its deterministic ID.
// stageStarting is a point's Stage attribute from its start until a stage
// has run stageAttrDelay.
const stageStarting = "starting"

func startPoint(ctx workflow.Context, sweepID string, p point.Spec, in PointInput) workflow.ChildWorkflowFuture {
	attrs := []temporal.SearchAttributeUpdate{
		temporalx.SAKind.ValueSet(temporalx.KindPoint), temporalx.SASweepID.ValueSet(sweepID), temporalx.SAConfigKey.ValueSet(p.ConfigKey),
		temporalx.SATopology.ValueSet(p.Topology), temporalx.SAConcurrency.ValueSet(int64(p.Conc)),
		// Running from its start: the point then writes no attribute
		// until its status changes or a stage runs 2 s (a visibility
		// write saved per point; PointWorkflow reads what it started
		// with).
		temporalx.SAStage.ValueSet(stageStarting), temporalx.SAPointStatus.ValueSet(point.StatusRunning)}
	summary := fmt.Sprintf("%s %s c%d (%d nodes, %d GPUs)", p.ConfigKey, p.Topology, p.Conc, p.Nodes, p.GPUs)
	if p.Added != nil {
		attrs = append(attrs, temporalx.SAAdaptive.ValueSet([]string{p.Added.Mode}))
		summary += ", added by " + p.Added.Mode
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            PointWorkflowID(sweepID, p.PointID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         summary,
		StaticDetails:         pointDetails(sweepID, p),
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...),
	})
	return workflow.ExecuteChildWorkflow(cctx, PointWorkflow, in)
}

// pointDetails is a point's static details in the Web UI.
func pointDetails(sweepID string, p point.Spec) string {
	d := fmt.Sprintf("**sweep** %s\n\n**point** %s\n\n**identity** `%s`\n\n**profile** `%s`\n\n**recipe** %s\n\n**image** %s",
		sweepID, p.PointID, p.Identity, p.ProfileHash, p.RecipePath, p.Image)
	if p.Added != nil {
		d += fmt.Sprintf("\n\n**added by %s** on %s: %s", p.Added.Mode, p.Added.Topology, p.Added.Reason)
	}
	return d
}

// childOutcome waits for a point's child workflow and turns its result into
// the outcome the sweep reports; st is the point's final state when known.
func childOutcome(ctx workflow.Context, p point.Spec, wid string, f workflow.Future) (PointOutcome, *PointState) {
	var st PointState
	err := f.Get(ctx, &st)
	out := PointOutcome{PointID: p.PointID, WorkflowID: wid, Status: st.Status}
	if err == nil {
		out.State = &st
		return out, &st
	}
	out.Error = RootMessage(err)
	var app *temporal.ApplicationError
	var failed PointState
	switch {
	case errors.As(err, &app) && app.HasDetails() && app.Details(&failed) == nil:
		out.State, out.Status = &failed, failed.Status
		return out, &failed
	case temporal.IsCanceledError(err) || ctx.Err() != nil:
		out.Status = point.StatusCancelled
	default:
		out.Status = point.StatusFailed
	}
	return out, nil
}
