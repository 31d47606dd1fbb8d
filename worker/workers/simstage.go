package workers

import (
	"context"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
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
		if err := holdBeating(ctx, s.d); err != nil {
			return nil, err
		}
	}
	return s.Next.ExecuteActivity(ctx, in)
}

// holdBeating waits d, heartbeating every 500 ms with the attempt's
// inherited details (or none).
func holdBeating(ctx context.Context, d time.Duration) error {
	var details []any
	if activity.HasHeartbeatDetails(ctx) {
		var raw json.RawMessage
		if err := activity.GetHeartbeatDetails(ctx, &raw); err == nil && len(raw) > 0 {
			details = []any{raw}
		}
	}
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		activity.RecordHeartbeat(ctx, details...)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-tick.C:
		}
	}
}
