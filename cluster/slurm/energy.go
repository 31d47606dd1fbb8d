package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

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

// Stop reads the rows once every expected GPU has a sample at or after
// now, so the window's end is bracketed: the collector scrapes once an
// interval, so that takes at most about an interval and a request
// timeout; after that it reads what is there and the gate judges it.
func (r telemetryRun) Stop(ctx context.Context) ([]energy.Sample, []energy.Device, []string, error) {
	devs := TelemetryDevices(r.p)
	end := float64(time.Now().UnixNano()) / 1e9
	deadline := time.Now().Add(time.Duration((2*r.p.Interval+r.p.RequestTimeout)*float64(time.Second)) + time.Second)
	for {
		rows, reasons, err := energy.ReadSamples(filepath.Join(r.p.Dir, power.SamplesFile))
		if err != nil {
			return nil, nil, nil, err
		}
		if bracketed(rows, devs, end) || time.Now().After(deadline) {
			return rows, devs, reasons, nil
		}
		select {
		case <-ctx.Done():
			return rows, devs, reasons, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bracketed says whether every device has a sample at or after t.
func bracketed(rows []energy.Sample, devs []energy.Device, t float64) bool {
	after := map[string]bool{}
	for _, r := range rows {
		if r.Timestamp >= t {
			after[fmt.Sprintf("%s/%d", r.Hostname, r.GPUIndex)] = true
		}
	}
	for _, d := range devs {
		if !after[fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex)] {
			return false
		}
	}
	return true
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
