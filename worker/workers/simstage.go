package workers

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// lengthened reports whether --sim-stage-time lengthens an activity: the
// point's stage chain (activities.StageActivities), except teardown;
// bookkeeping stays instant.
func lengthened(activityType string) bool {
	stage, ok := activities.StageActivities[activityType]
	return ok && stage != point.StageTeardown
}

// simStageTime is a worker interceptor that makes every stage of a
// simulated cluster last at least d before it runs, heartbeating meanwhile
// and keeping the details an earlier attempt left (checkpoint staging
// resumes from them). Real stages take minutes; simulated ones take
// milliseconds, too short to kill a worker in the middle of one.
type simStageTime struct {
	interceptor.WorkerInterceptorBase
	d time.Duration
}

func (s *simStageTime) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &simStageInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, d: s.d}
}

type simStageInbound struct {
	interceptor.ActivityInboundInterceptorBase
	d time.Duration
}

func (s *simStageInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if lengthened(activity.GetInfo(ctx).ActivityType.Name) {
		if err := temporalx.HoldBeating(ctx, s.d); err != nil {
			return nil, err
		}
	}
	return s.Next.ExecuteActivity(ctx, in)
}
