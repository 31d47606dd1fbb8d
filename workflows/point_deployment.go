package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
)

// acquire returns the stage input on the point's allocation: the one it
// holds (handed over by the previous point of its deployment, probed first)
// or a fresh one with the checkpoint staged. stop reports that the operator
// skipped a stage that ends the point.
func (r *pointRun) acquire(ctx workflow.Context) (activities.StageInput, bool, error) {
	p := r.in.Point
	if r.in.Deployment != nil && r.allocated {
		in := activities.StageInput{Point: p, Alloc: r.alloc, Endpoint: r.endpoint}
		if r.probe(ctx, &in) && (in.Endpoint != nil || !r.in.Deployment.Added) {
			r.markShared(ctx, point.StageAllocate)
			return in, false, nil
		}
	}
	if r.in.Deployment != nil && r.in.Deployment.Added {
		// An added point runs on the server its deployment holds up, or not
		// at all: it never allocates or brings a server up.
		return activities.StageInput{}, true, addedNoServer(p, "the handed-over server does not answer")
	}
	var alloc cluster.Allocation
	skipped, err := r.stage(ctx, point.StageAllocate, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.Allocate, p).Get(actx, &alloc)
	})
	if err != nil || skipped {
		return activities.StageInput{}, true, err
	}
	r.alloc, r.allocated, r.endpoint = alloc, true, nil
	r.state.NodesHeld, r.state.Released = len(alloc.Nodes), false
	if r.state.NodesHeld == 0 {
		r.state.NodesHeld = p.Nodes
	}

	in := activities.StageInput{Point: p, Alloc: alloc}
	var ck cluster.StageReport
	if skipped, err := r.stage(ctx, point.StageCheckpoint, func(actx workflow.Context) error {
		return workflow.ExecuteActivity(actx, r.acts.StageCheckpoint, in).Get(actx, &ck)
	}); err != nil || skipped {
		return in, true, err
	}
	return in, false, nil
}

// probe checks a handed-over allocation and its server. It reports false
// when the allocation is gone (it is torn down; the point allocates again)
// and drops the endpoint when the server died (the point brings it up
// again, and that bring-up counts).
func (r *pointRun) probe(ctx workflow.Context, in *activities.StageInput) bool {
	pctx := workflow.WithActivityOptions(ctx, ActivityOptions(point.StageProbe, r.in.TaskQueue, r.in.Tuning))
	var chk activities.ServerCheck
	if err := workflow.ExecuteActivity(pctx, r.acts.CheckServer, *in).Get(pctx, &chk); err != nil {
		workflow.GetLogger(ctx).Warn("cannot probe the handed-over allocation; allocating again",
			"point", r.in.Point.PointID, "error", RootMessage(err))
		r.teardown(ctx)
		return false
	}
	if !chk.AllocationAlive {
		workflow.GetLogger(ctx).Warn("handed-over allocation is gone; allocating again", "point", r.in.Point.PointID, "reason", chk.Reason)
		r.teardown(ctx)
		return false
	}
	if in.Endpoint != nil && !chk.ServerAlive {
		workflow.GetLogger(ctx).Warn("handed-over server died; bringing it up again", "point", r.in.Point.PointID, "reason", chk.Reason)
		in.Endpoint, r.endpoint = nil, nil
	}
	return true
}

// awaitEvalTurn hands the allocation to the deployment's group after the
// point's perf run and waits for the group's eval phase, then takes the
// allocation it is given (or allocates again when there is none).
func (r *pointRun) awaitEvalTurn(ctx workflow.Context) (activities.StageInput, bool, error) {
	p := r.in.Point
	h := PerfDone{PointID: p.PointID, Perf: r.state.Perf, ServerTime: serverTime(r.state.Stages)}
	if r.allocated {
		h.Lease = r.lease()
		r.allocated, r.endpoint, r.state.NodesHeld = false, nil, 0
	}
	r.state.Stage = "awaiting-eval-turn"
	r.publish(ctx)
	if err := workflow.SignalExternalWorkflow(ctx, r.in.Deployment.Workflow, "", SignalPerfDone, h).Get(ctx, nil); err != nil {
		// No group to wait for: keep the nodes and go on alone.
		workflow.GetLogger(ctx).Warn("cannot hand the server to the deployment group", "point", p.PointID, "error", err)
		if h.Lease != nil {
			r.adopt(h.Lease)
		}
		r.evalTurnDone, r.handBack = true, false
		return r.acquire(ctx)
	}
	var turn EvalTurn
	got := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalEvalTurn), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &turn)
		got = true
	})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	sel.Select(ctx)
	if !got {
		return activities.StageInput{}, true, ctx.Err()
	}
	r.evalTurnDone, r.handBack = true, turn.HandBack
	if turn.Lease != nil {
		r.adopt(turn.Lease)
	}
	return r.acquire(ctx)
}

// adopt takes over an allocation handed over by another point.
func (r *pointRun) adopt(l *Lease) {
	r.alloc, r.allocated, r.endpoint = l.Alloc, true, l.Endpoint
	r.state.NodesHeld, r.state.Released = len(l.Alloc.Nodes), false
	if r.state.NodesHeld == 0 {
		r.state.NodesHeld = r.in.Point.Nodes
	}
}

// lease is the allocation and server the point holds, to hand over.
func (r *pointRun) lease() *Lease {
	return &Lease{Alloc: r.alloc, Endpoint: r.endpoint, From: r.in.Point.PointID}
}

// markShared records a stage the point did not run because it uses what an
// earlier point of its deployment set up (allocation, server).
func (r *pointRun) markShared(ctx workflow.Context, stage string) {
	now := workflow.Now(ctx)
	r.state.Stages = append(r.state.Stages, point.StageRun{Stage: stage, Outcome: point.OutcomeShared, Started: now, Ended: now, Rounds: 1})
}

// deferringEval: the point's eval still waits for the group's eval phase.
func (r *pointRun) deferringEval() bool {
	return r.in.Deployment != nil && r.in.Deployment.DeferEval && !r.evalTurnDone
}
