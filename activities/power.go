package activities

import (
	"cmp"
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
)

// PowerConfig says how the perf stage measures GPU power over its window.
type PowerConfig struct {
	// Require sends a power-invalid perf result to the operator gate, as
	// InferenceX's REQUIRE_POWER=1 fails a power study; without it the
	// result is stored with its perf figures and marked power-invalid.
	Require bool
	// Source is the backend's power source (energy.SourceNVML on a local
	// host with nvidia-smi, energy.SourceDCGM on Slurm; "" none); a
	// simulated cluster's is always the simulator's model. The backend
	// must be a cluster.PowerSource for it to sample.
	Source string
}

// simCadence is how often the simulator's power model is sampled, engine
// seconds: dcgm-exporter's and srt-slurm's 1 s cadence.
const simCadence = 1.0

// powerSource is where this worker's perf windows get power samples from
// ("" none): part of the measurement profile.
func (a *Activities) powerSource() string {
	if a.Simulated {
		return energy.SourceSimulated
	}
	if _, ok := a.Backend.(cluster.PowerSource); ok {
		return a.Power.Source
	}
	return ""
}

// startPower begins sampling the backend's GPUs before the perf window
// (nil: no power source for this allocation): nvidia-smi on a local GPU
// host, a telemetry recipe's collector files on Slurm, emulated or real.
// A simulated cluster without one gets the simulator's model after the
// run. A source that fails to start leaves the point power-invalid, never
// its perf.
func (a *Activities) startPower(ctx context.Context, in StageInput) (*powerRun, *energy.Figures) {
	ps, ok := a.Backend.(cluster.PowerSource)
	if !ok || a.Power.Source == "" || in.Endpoint == nil {
		return nil, nil
	}
	run, src, err := ps.StartPower(ctx, in.Alloc, *in.Endpoint, in.Point.GPUs)
	if err != nil {
		a.log(ctx).Warn("power sampling did not start", zap.String("point", in.Point.PointID), zap.Error(err))
		return nil, energy.Invalid(cmp.Or(src, a.Power.Source), a.Simulated, energy.ReasonNotCollected)
	}
	if run == nil {
		return nil, nil
	}
	return &powerRun{run: run, source: src}, nil
}

// powerRun is a started power source and what it samples.
type powerRun struct {
	run    cluster.PowerRun
	source string
}

// stopPower ends the sampling and judges the window's figures.
func (a *Activities) stopPower(ctx context.Context, r *powerRun, w energy.Window, t energy.Tokens) *energy.Figures {
	rows, devs, reasons, err := r.run.Stop(ctx)
	if err != nil {
		a.log(ctx).Warn("power samples not read", zap.Error(err))
		return energy.Invalid(r.source, a.Simulated, energy.ReasonNotCollected)
	}
	f := energy.Compute(r.source, rows, devs, w, t, energy.Rule{})
	if len(reasons) > 0 && f.Valid {
		// Rows the reader dropped as malformed are a broken file, as
		// InferenceX's package recompute treats them.
		f = energy.Invalid(r.source, a.Simulated, reasons...)
	}
	f.Simulated = a.Simulated
	return f
}

// wallWindow is a load-generator run's window on the worker's wall clock,
// which power samples are stamped with: the measured window, in the
// engine's seconds, times the engine clock's rate (1 for a real engine).
func (a *Activities) wallWindow(res *loadgen.Result) energy.Window {
	start := float64(res.StartedAt.UnixNano()) / 1e9
	return energy.Window{Start: start, End: start + res.Aggregate.Window*a.clockScale()}
}

// engineWindow is the same window on the engine's clock, which the
// simulator's model is sampled on.
func engineWindow(res *loadgen.Result) energy.Window {
	start := float64(res.StartedAt.UnixNano()) / 1e9
	return energy.Window{Start: start, End: start + res.Aggregate.Window}
}

// simulatedPower samples the simulator's power model (energy.Model) over a
// load-generator run's window, with the load its requests put on the
// deployment, and judges the figures. Times are the run's engine clock.
func (a *Activities) simulatedPower(p point.Spec, alloc cluster.Allocation, res *loadgen.Result) *energy.Figures {
	w := engineWindow(res)
	start := w.Start
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
func (a *Activities) gatePower(ctx context.Context, p point.Spec, out point.PerfSummary) error {
	f := out.Power
	if f == nil || f.Valid {
		return nil
	}
	a.log(ctx).Warn("power refused by the power gate", zap.String("point", p.PointID), zap.String("reason", f.Reason()), zap.Bool("required", a.Power.Require))
	if !a.Power.Require {
		return nil
	}
	msg := fmt.Sprintf("perf: power required and invalid: %s", f.Reason())
	return temporal.NewNonRetryableApplicationError(msg, string(failure.ErrPowerInvalid), nil, *f)
}
