package metrics

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// stageOf maps an activity type to the stage it runs; bookkeeping
// activities (ledger records, reuse lookups) are not stages.
var stageOf = map[string]string{
	"Allocate":        point.StageAllocate,
	"StageCheckpoint": point.StageCheckpoint,
	"BringUp":         point.StageBringUp,
	"Warmup":          point.StageWarmup,
	"Perf":            point.StagePerf,
	"Eval":            point.StageEval,
	"Upload":          point.StageUpload,
	"Teardown":        point.StageTeardown,
}

// recordPoint is the activity whose input carries a point's final status.
const recordPoint = "RecordPoint"

// Interceptor records sweepflow's metrics. It is observation only: it never
// changes an activity's or a workflow's behaviour, so adding it to a worker
// with running workflows is safe (it issues no commands).
type Interceptor struct {
	interceptor.WorkerInterceptorBase
}

// NewInterceptor returns the worker interceptor; it records through the
// client's metrics handler (a no-op handler records nothing).
func NewInterceptor() *Interceptor { return &Interceptor{} }

// InterceptActivity times stage activities and counts finished points.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}}
}

// finalStatus is the RecordPoint activity's argument (activities.PointRecord),
// known by its method so that metrics sits below the activities.
type finalStatus interface{ FinalStatus() string }

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	res, err := a.Next.ExecuteActivity(ctx, in)
	typ := activity.GetInfo(ctx).ActivityType.Name
	h := activity.GetMetricsHandler(ctx)
	if stage, ok := stageOf[typ]; ok {
		h.WithTags(map[string]string{"stage": stage, "outcome": outcome(ctx, err)}).Timer(StageDuration).Record(time.Since(start))
	}
	if typ == recordPoint && err == nil && len(in.Args) == 1 {
		if rec, ok := in.Args[0].(finalStatus); ok && rec.FinalStatus() != "" {
			h.WithTags(map[string]string{"status": rec.FinalStatus()}).Counter(PointsFinished).Inc(1)
		}
	}
	return res, err
}

func outcome(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "ok"
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || temporal.IsCanceledError(err):
		return "cancelled"
	}
	return "error"
}

// InterceptWorkflow watches the PointStatus search attribute: a point that
// publishes awaiting-operator and later anything else waited for an operator
// for the workflow-time difference.
func (i *Interceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *workflowInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}})
}

// workflowOutbound lives as long as one workflow execution; its state is
// rebuilt deterministically on replay (it only reads what the workflow
// upserts and workflow time).
type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	waiting bool
	since   time.Time
	stage   string
}

func (o *workflowOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := o.Next.UpsertTypedSearchAttributes(ctx, updates...)
	if err != nil {
		return err
	}
	sa := temporal.NewSearchAttributes(updates...)
	status, ok := sa.GetKeyword(temporalx.SAPointStatus)
	if !ok {
		return nil
	}
	stage, _ := sa.GetKeyword(temporalx.SAStage)
	h := o.Next.GetMetricsHandler(ctx)
	switch {
	case status == point.StatusAwaitingOperator && !o.waiting:
		o.waiting, o.since, o.stage = true, o.Next.Now(ctx), stage
		h.WithTags(map[string]string{"stage": stage}).Counter(OperatorWaits).Inc(1)
	case status != point.StatusAwaitingOperator && o.waiting:
		o.waiting = false
		h.WithTags(map[string]string{"stage": o.stage, "outcome": status}).Timer(OperatorWait).Record(o.Next.Now(ctx).Sub(o.since))
	}
	return nil
}
