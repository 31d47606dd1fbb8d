package temporalx

import (
	"context"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/activity"
)

// HoldBeating waits d inside an activity, heartbeating every 500 ms with
// the attempt's inherited details (or none), so a wait longer than the
// heartbeat timeout is not taken for a lost worker.
func HoldBeating(ctx context.Context, d time.Duration) error {
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
