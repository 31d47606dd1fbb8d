package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// TestPerfStoresSimulatedPower: on a simulated cluster, perf samples the
// simulator's power model over its window and stores the figures with the
// perf result, labelled simulated; the source is in the measurement
// profile.
func TestPerfStoresSimulatedPower(t *testing.T) {
	a := newLedgerActs(t)
	a.Simulated = true
	p := gateSpec("s-power")
	val, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, engineOK)}})
	require.NoError(t, err)
	var out point.PerfSummary
	require.NoError(t, val.Get(&out))
	require.NotNil(t, out.Power)
	f := out.Power
	require.True(t, f.Valid, f.Reason())
	assert.True(t, f.Simulated)
	assert.Equal(t, energy.SourceSimulated, f.Source)
	assert.Equal(t, 8, f.ExpectedGPUs)
	// 8 aggregated GPUs at least idle (160 W) over the window.
	assert.GreaterOrEqual(t, f.AvgPowerW, energy.SimulatedGB200.IdleW)
	require.NotNil(t, out.Evidence)
	assert.InDelta(t, f.TotalGPUEnergyJ/float64(out.Evidence.OutputTokens), f.JoulesPerOutputToken, 1e-9, "over the output the server reported")
	so, stored, err := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
	require.NoError(t, err)
	require.True(t, stored)
	assert.Contains(t, string(so.OutputJSON), `"power":{"power_source":"simulated","simulated":true,"power_valid":true`)
	assert.Contains(t, string(so.ProfileJSON), `"power_source":"simulated"`)
}

// TestPowerInvalidKeepsPerf: a perf result whose power the gate refuses is
// stored with its perf figures and marked power-invalid; with
// --require-power it goes to the operator gate instead (non-retryable
// PowerInvalid, the figures as evidence) and is not stored.
func TestPowerInvalidKeepsPerf(t *testing.T) {
	for _, require_ := range []bool{false, true} {
		a := newLedgerActs(t)
		a.Simulated, a.Power.Require = true, require_
		p := gateSpec("s-power-invalid")
		p.GPUs = 0 // the model has no GPU to sample: expected_device_missing
		val, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, engineOK)}})
		_, stored, serr := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
		require.NoError(t, serr)
		if require_ {
			app := appError(t, err)
			assert.Equal(t, string(failure.ErrPowerInvalid), app.Type())
			assert.True(t, app.NonRetryable(), "power required: the operator decides")
			assert.Contains(t, app.Error(), "power required and invalid: ")
			assert.Contains(t, app.Error(), energy.ReasonDeviceMissing)
			var ev energy.Figures
			require.NoError(t, app.Details(&ev))
			assert.False(t, ev.Valid)
			assert.False(t, stored)
			continue
		}
		require.NoError(t, err)
		var out point.PerfSummary
		require.NoError(t, val.Get(&out))
		assert.Greater(t, out.TTFTp90Ms, 0.0, "perf figures kept")
		assert.Equal(t, 20, out.Requests)
		require.NotNil(t, out.Power)
		assert.False(t, out.Power.Valid)
		assert.Contains(t, out.Power.Reasons, energy.ReasonDeviceMissing)
		assert.True(t, stored)
	}
}

// powerBackend is a backend with a power source: its GPUs draw watts from
// StartPower until Stop, sampled every 250 ms; missing leaves one GPU out.
type powerBackend struct {
	fakeBackend
	watts   float64
	missing bool
	start   time.Time
}

func (b *powerBackend) StartPower(_ context.Context, _ cluster.Allocation, _ cluster.Server, gpus int) (cluster.PowerRun, string, error) {
	b.start = time.Now().Add(-2 * time.Second)
	return powerBackendRun{b: b, gpus: gpus}, energy.SourceNVML, nil
}

type powerBackendRun struct {
	b    *powerBackend
	gpus int
}

func (r powerBackendRun) Stop(context.Context) ([]energy.Sample, []energy.Device, []string, error) {
	var rows []energy.Sample
	var devs []energy.Device
	end := time.Now().Add(2 * time.Second)
	for g := 0; g < r.gpus; g++ {
		devs = append(devs, energy.Device{Hostname: "h", GPUIndex: g, Role: energy.RoleAgg})
		if r.b.missing && g == r.gpus-1 {
			continue
		}
		for t, seq := r.b.start, 0; t.Before(end); t, seq = t.Add(250*time.Millisecond), seq+1 {
			rows = append(rows, energy.Sample{Timestamp: float64(t.UnixNano()) / 1e9, Seq: seq, Hostname: "h", GPUIndex: g, GPUUUID: fmt.Sprintf("GPU-%d", g), PowerW: r.b.watts})
		}
	}
	return rows, devs, nil, nil
}

// TestPerfReadsBackendPower: a real engine's perf window reads the backend's
// power source (nvidia-smi, telemetry files): figures over the window,
// source in the profile; a GPU that never reports leaves the point
// power-invalid with its perf figures.
func TestPerfReadsBackendPower(t *testing.T) {
	for _, missing := range []bool{false, true} {
		a := newLedgerActs(t)
		a.Backend, a.Power.Source = &powerBackend{watts: 400, missing: missing}, energy.SourceNVML
		p := gateSpec(fmt.Sprintf("s-backend-power-%v", missing))
		val, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, engineOK)}})
		require.NoError(t, err)
		var out point.PerfSummary
		require.NoError(t, val.Get(&out))
		require.NotNil(t, out.Power)
		assert.Equal(t, energy.SourceNVML, out.Power.Source)
		assert.False(t, out.Power.Simulated)
		assert.Greater(t, out.TTFTp90Ms, 0.0)
		if missing {
			assert.Equal(t, []string{energy.ReasonDeviceMissing}, out.Power.Reasons)
			continue
		}
		require.True(t, out.Power.Valid, out.Power.Reason())
		assert.InDelta(t, 400, out.Power.AvgPowerW, 1e-9)
		assert.Equal(t, 8, out.Power.ExpectedGPUs)
		so, _, err := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
		require.NoError(t, err)
		assert.Contains(t, string(so.ProfileJSON), `"power_source":"nvml"`)
	}
}
