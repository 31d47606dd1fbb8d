package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
)

// PowerConfig says how the perf stage measures GPU power over its window.
type PowerConfig struct {
	// Require sends a power-invalid perf result to the operator gate, as
	// InferenceX's REQUIRE_POWER=1 fails a power study; without it the
	// result is stored with its perf figures and marked power-invalid.
	Require bool
}

// PowerInvalidType is the application error type of a perf result whose
// power the gate refused while power is required.
const PowerInvalidType = "PowerInvalid"

// simCadence is how often the simulator's power model is sampled, engine
// seconds: dcgm-exporter's and srt-slurm's 1 s cadence.
const simCadence = 1.0

// powerSource is where this worker's perf windows get power samples from
// ("" none): part of the measurement profile.
func (a *Activities) powerSource() string {
	if a.Simulated {
		return energy.SourceSimulated
	}
	return ""
}

// simulatedPower samples the simulator's power model (energy.Model) over a
// load-generator run's window, with the load its requests put on the
// deployment, and judges the figures. Times are the run's engine clock.
func (a *Activities) simulatedPower(p point.Spec, alloc Allocation, res *loadgen.Result) *energy.Figures {
	start := float64(res.StartedAt.UnixNano()) / 1e9
	w := energy.Window{Start: start, End: start + res.Aggregate.Window}
	busy := make([]energy.Busy, 0, len(res.Requests))
	for _, r := range res.Requests {
		if r.EndNs <= 0 {
			continue
		}
		first := r.FirstTokenNs
		if first < 0 {
			first = r.EndNs
		}
		busy = append(busy, energy.Busy{Start: start + float64(r.SendNs)/1e9, FirstToken: start + float64(first)/1e9, End: start + float64(r.EndNs)/1e9})
	}
	m := energy.SimulatedGB200
	devs := energy.SimDevices(p.PrefillGPUs, p.DecodeGPUs, p.GPUs, a.GPUsPerNode, alloc.Nodes)
	f := energy.Compute(energy.SourceSimulated, m.Simulate(devs, w, simCadence, busy), devs, w, tokensOf(res.Aggregate), energy.Rule{BoardLimitW: m.BoardLimitW})
	f.Simulated = true
	return f
}

func tokensOf(a loadgen.Aggregate) energy.Tokens {
	return energy.Tokens{Completed: a.Completed, InputTokens: a.TotalInputTokens, OutputTokens: a.TotalOutputTokens}
}

// gatePower applies --require-power: a power-invalid result goes to the
// operator gate (non-retryable, with the figures as evidence) instead of
// being stored. Without it the result is stored power-invalid.
func (a *Activities) gatePower(ctx context.Context, p point.Spec, out PerfSummary) error {
	f := out.Power
	if f == nil || f.Valid {
		return nil
	}
	a.log(ctx).Warn("power refused by the power gate", zap.String("point", p.PointID), zap.String("reason", f.Reason()), zap.Bool("required", a.Power.Require))
	if !a.Power.Require {
		return nil
	}
	msg := fmt.Sprintf("perf: power required and invalid: %s", f.Reason())
	return temporal.NewNonRetryableApplicationError(msg, PowerInvalidType, nil, *f)
}
