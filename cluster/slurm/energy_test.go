package slurm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/energy"
)

// TestStartPowerReadsTelemetryFiles: a bring-up with a power collector has
// power: its samples.csv rows and its expected devices with their worker
// roles; a bring-up without one has no power source.
func TestStartPowerReadsTelemetryFiles(t *testing.T) {
	work := t.TempDir()
	b := &Backend{}
	alloc := cluster.Allocation{WorkDir: work}
	srv := cluster.Server{Handle: "serve-1"}
	run, src, err := b.StartPower(context.Background(), alloc, srv, 8)
	require.NoError(t, err)
	assert.Nil(t, run)
	assert.Empty(t, src)

	pdir := filepath.Join(work, "serve-1", "logs", "power")
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	pt := srtlaunch.PowerTelemetry{Dir: pdir, Devices: []srtlaunch.PowerDevice{
		{Hostname: "gb200-01", GPUIndex: 0, Assignments: []srtlaunch.PowerAssignment{{WorkerRole: "prefill"}}},
		{Hostname: "gb200-02", GPUIndex: 0, Assignments: []srtlaunch.PowerAssignment{{WorkerRole: "decode"}}},
	}}
	data, err := json.Marshal(pt)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(work, "serve-1", "power-collector.json"), data, 0o644))
	f, err := os.Create(filepath.Join(pdir, "samples.csv"))
	require.NoError(t, err)
	require.NoError(t, energy.WriteSamples(f, []energy.Sample{
		{Timestamp: 10, Seq: 0, Hostname: "gb200-01", GPUIndex: 0, GPUUUID: "GPU-a", PowerW: 500},
		{Timestamp: 10, Seq: 0, Hostname: "gb200-02", GPUIndex: 0, GPUUUID: "GPU-b", PowerW: 300},
	}))
	require.NoError(t, f.Close())

	run, src, err = b.StartPower(context.Background(), alloc, srv, 8)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, energy.SourceDCGM, src)
	rows, devs, reasons, err := run.Stop(context.Background())
	require.NoError(t, err)
	assert.Empty(t, reasons)
	assert.Len(t, rows, 2)
	assert.Equal(t, []energy.Device{{Hostname: "gb200-01", GPUIndex: 0, Role: energy.RolePrefill}, {Hostname: "gb200-02", GPUIndex: 0, Role: energy.RoleDecode}}, devs)
}
