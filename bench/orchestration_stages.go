package bench

import (
	"context"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/point"
)

// benchActivities runs the real allocate, checkpoint, bring-up and teardown
// activities on the no-op backend; the stages that would talk to a server
// or the ledger return at once with empty, simulated-labelled outputs.
type benchActivities struct {
	*activities.Activities
}

func (benchActivities) Warmup(context.Context, activities.StageInput) error { return nil }

func (benchActivities) Perf(context.Context, activities.StageInput) (point.PerfSummary, error) {
	return point.PerfSummary{Simulated: true}, nil
}

func (benchActivities) Eval(context.Context, activities.StageInput) (point.EvalSummary, error) {
	return point.EvalSummary{Passed: true, Simulated: true, Reason: "no-op backend: nothing measured"}, nil
}

func (benchActivities) Upload(context.Context, activities.UploadInput) error { return nil }

func (benchActivities) RecordPoint(context.Context, activities.PointRecord) error { return nil }

func (benchActivities) RecordSweep(context.Context, activities.SweepRecord) error { return nil }

func (benchActivities) LookupReuse(context.Context, activities.ReuseRequest) (activities.Reused, error) {
	return activities.Reused{}, nil
}
