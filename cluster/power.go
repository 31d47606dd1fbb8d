package cluster

import (
	"context"

	"github.com/sweepflow/sweepflow/energy"
)

// PowerSource is a backend that can read its GPUs' board power over a perf
// run's measurement window (package energy): nvidia-smi on the local host,
// the telemetry stage's files on Slurm. The perf activity starts a
// PowerRun before the window and stops it after; the samples and the
// deployment's devices then go through energy's gate.
type PowerSource interface {
	// StartPower begins sampling the allocation's GPUs; source is what the
	// samples come from (energy.SourceNVML, SourceDCGM), or "" when this
	// allocation has no power source (no nvidia-smi, a recipe without
	// telemetry), in which case run is nil.
	StartPower(ctx context.Context, alloc Allocation, srv Server, gpus int) (run PowerRun, source string, err error)
}

// PowerRun is one window's sampling.
type PowerRun interface {
	// Stop ends the sampling and returns the samples, the devices the
	// deployment holds, and why rows were dropped.
	Stop(ctx context.Context) (samples []energy.Sample, devices []energy.Device, reasons []string, err error)
}
