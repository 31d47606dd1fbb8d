package nightly

import (
	"context"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/workflows"
)

// ForecastOptions asks a nightly to forecast each night's sweep before it
// runs and to post the forecast to the webhook then (Input.Forecast). The
// profile is the cluster's as the schedule was created; the ledger's
// measured stage times replace the assumptions where it has them.
type ForecastOptions struct {
	Profile     forecast.Profile     `json:"profile"`
	Assumptions forecast.Assumptions `json:"assumptions"`
}

// ForecastRequest forecasts tonight's sweep.
type ForecastRequest struct {
	NightlyID string               `json:"nightly_id"`
	Sweep     workflows.SweepInput `json:"sweep"`
	Options   ForecastOptions      `json:"options"`
}

// ForecastNight runs the forecast (the sweep workflow in virtual time) in
// the activity, so the nightly workflow only records its result: the CPU
// work stays out of the workflow and its replay.
func (a *Activities) ForecastNight(ctx context.Context, req ForecastRequest) (forecast.Brief, error) {
	activity.RecordHeartbeat(ctx, "forecasting")
	in := forecast.Inputs{Profile: req.Options.Profile, Assumptions: req.Options.Assumptions}
	if a.Store != nil {
		var deps []string
		for _, p := range req.Sweep.Points {
			if k := p.DeploymentKey(); !slices.Contains(deps, k) {
				deps = append(deps, k)
			}
		}
		m, err := forecast.FromLedger(ctx, a.Store, deps)
		if err != nil {
			return forecast.Brief{}, classify(err)
		}
		in.Measured = m
	}
	c, err := runner.Run(req.Sweep, in)
	if err != nil {
		// The inputs cannot give a forecast (no bring-up time): a retry
		// would not either.
		return forecast.Brief{}, temporal.NewNonRetryableApplicationError(err.Error(), string(failure.ErrBadConfig), err)
	}
	b := c.Brief()
	a.log(ctx).Info("nightly forecast", zap.String("nightly", req.NightlyID), zap.Int("points", b.Points),
		zap.Float64("node_hours", b.NodeHours), zap.Float64("makespan_hours", b.MakespanHours))
	return b, nil
}
