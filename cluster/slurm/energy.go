package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/power"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/energy"
)

// StartPower reads a telemetry recipe's power over the perf window: the
// bring-up's collector (telemetry dcgm-power, `starter power collect`)
// writes samples.csv as it scrapes, so nothing starts here; Stop reads the
// rows and the expected devices with their worker roles from the
// collector's settings (power-collector.json beside the bring-up's logs).
// A deployment without telemetry has no power source. The collector's
// clock is the head node's and the window the worker's; on a real cluster
// they agree to NTP's precision, well inside the 3 s gap rule.
func (b *Backend) StartPower(_ context.Context, alloc cluster.Allocation, srv cluster.Server, _ int) (cluster.PowerRun, string, error) {
	cfg := filepath.Join(alloc.WorkDir, srv.Handle, "power-collector.json")
	data, err := os.ReadFile(cfg)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, energy.SourceDCGM, err
	}
	var p srtlaunch.PowerTelemetry
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, energy.SourceDCGM, fmt.Errorf("%s: %w", cfg, err)
	}
	return telemetryRun{p: p}, energy.SourceDCGM, nil
}

type telemetryRun struct{ p srtlaunch.PowerTelemetry }

func (r telemetryRun) Stop(context.Context) ([]energy.Sample, []energy.Device, []string, error) {
	rows, reasons, err := energy.ReadSamples(filepath.Join(r.p.Dir, power.SamplesFile))
	if err != nil {
		return nil, nil, nil, err
	}
	return rows, TelemetryDevices(r.p), reasons, nil
}

// TelemetryDevices are the collector's expected devices with the role of
// the worker processes holding each (srt-slurm's worker_role: prefill,
// decode, agg).
func TelemetryDevices(p srtlaunch.PowerTelemetry) []energy.Device {
	out := make([]energy.Device, 0, len(p.Devices))
	for _, d := range p.Devices {
		role := energy.RoleAgg
		if len(d.Assignments) > 0 {
			role = d.Assignments[0].WorkerRole
		}
		out = append(out, energy.Device{Hostname: d.Hostname, GPUIndex: d.GPUIndex, Role: role})
	}
	return out
}
