package workers

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/sweepflow/sweepflow/temporalx"
)

// simStageActivities are the activities of the point's stage chain that
// --sim-stage-time lengthens (teardown and bookkeeping stay instant).
var simStageActivities = map[string]bool{
	"Allocate": true, "StageCheckpoint": true, "BringUp": true, "Warmup": true,
	"Perf": true, "Eval": true, "Upload": true,
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
	if simStageActivities[activity.GetInfo(ctx).ActivityType.Name] {
		if err := temporalx.HoldBeating(ctx, s.d); err != nil {
			return nil, err
		}
	}
	return s.Next.ExecuteActivity(ctx, in)
}
