package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/cluster/slurm/power"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
)

// TestSlurmIXFeatures runs the recipe features of InferenceX's GB200/GB300
// keys through the real launcher on the emulated partition
// (configs/sweeps/ix-features-gb200.yaml, one point each): a vLLM
// deployment with the Mooncake KV store behind vllm serve (frontend.type
// vllm: no etcd/NATS, no frontend process), a 1P1D vLLM deployment publishing
// KV events and a 1P1D SGLang 8k1k deployment with DCGM power telemetry,
// each through bring-up, warmup, perf, eval and teardown. Perf runs
// sweepflow's load generator (an 8k1k recipe's SA-Bench has no simulator
// role; the agentic ones would run agentic_srt.sh, which the seed and
// backends tests cover). From the roles' logs it checks that every process
// (the Mooncake master and the DCGM exporters included) received its
// freshly rendered argv and env_to_set and that the launch wrote the
// rendered files (mooncake_store_config.json); that the vLLM workers joined
// the master and bound their KV event publishers; and that the power
// collector wrote samples.csv for every expected GPU and a terminal
// manifest.
func TestSlurmIXFeatures(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	s := newSlurmIT(t)
	s.perfClient = point.PerfClientLoadgen
	s.startWorker(0)

	in := s.sweepOf(t, "../configs/sweeps/ix-features-gb200.yaml", "slurm-ixf")
	require.Len(t, in.Points, 3)
	s.runToCompletion(t, 8*time.Minute, in)

	cl, err := config.LoadCluster(s.profile)
	require.NoError(t, err)
	noSynthetic := deploymentCheck{synthetic: func(t *testing.T, name string, argv []string, env map[string]string, _ bool) {
		for _, k := range synthKeys {
			assert.NotContains(t, env, k, name)
		}
		assert.NotContains(t, strings.Join(argv, " "), "synthetic", name)
	}}
	seen := map[string]bool{}
	for _, p := range in.Points {
		require.True(t, p.Eval, "%s: the point runs its eval", p.ExpName)
		jobDir := filepath.Join(cl.SharedRoot, "jobs", slurm.JobName("sweepflow", in.SweepID, p.PointID))
		modes, perfDirs := checkSeedServes(t, cl, p, jobDir, noSynthetic)
		require.Equal(t, []string{"perf"}, modes, "%s: perf and eval on one bring-up (no synthetic acceptance to undo)", p.ExpName)
		dir, procs := perfDirs[0].dir, perfDirs[0].procs
		byRole := map[srtlaunch.Role][]*srtlaunch.Process{}
		for _, proc := range procs {
			byRole[proc.Role] = append(byRole[proc.Role], proc)
		}
		switch {
		case strings.Contains(p.RecipePath, "mooncake"):
			seen["mooncake"] = true
			require.Len(t, byRole[srtlaunch.RoleMooncake], 1, "%s: one Mooncake master", p.ExpName)
			require.Empty(t, byRole[srtlaunch.RoleInfra], "%s: vllm serve needs no etcd/NATS", p.ExpName)
			require.Empty(t, byRole[srtlaunch.RoleFrontend], "%s: vllm serve is its own frontend", p.ExpName)
			logHas(t, byRole[srtlaunch.RoleMooncake][0].Output, "SIMULATED mooncake_master rpc on")
			require.FileExists(t, filepath.Join(dir, "mooncake_store_config.json"))
			for _, w := range byRole[srtlaunch.RoleAgg] {
				require.Equal(t, []string{"vllm", "serve"}, w.Command[:2], w.Output)
				logHas(t, w.Output, "SIMULATED MooncakeStoreConnector joined the master at 10.0.0.")
			}
		case strings.Contains(p.RecipePath, "kvevents"):
			seen["kv-events"] = true
			for _, w := range append(byRole[srtlaunch.RolePrefill], byRole[srtlaunch.RoleDecode]...) {
				require.Contains(t, strings.Join(w.Command, " "), `--kv-events-config {"publisher": "zmq"`, w.Output)
				logHas(t, w.Output, "SIMULATED KV events publisher (topic kv-events)")
			}
		case strings.Contains(p.RecipePath, "power"):
			seen["telemetry"] = true
			require.Len(t, byRole[srtlaunch.RoleTelemetry], 1, "%s: one exporter step over the worker nodes", p.ExpName)
			logHas(t, byRole[srtlaunch.RoleTelemetry][0].Output, "SIMULATED dcgm-exporter for 4 GPUs")
			checkPower(t, dir, procs)
			checkPowerFigures(t, s, in.SweepID, p.PointID, dir)
		}
	}
	require.Len(t, seen, 3, "%v", seen)
}

// checkPowerFigures: the telemetry point's stored perf carries power figures
// read from the files the simulated telemetry processes wrote (source
// dcgm-power, not the simulator's model), over every GPU the collector
// expected, labelled simulated; the other points, without telemetry, carry
// the model's figures.
func checkPowerFigures(t *testing.T, s *slurmIT, sweepID, pointID, dir string) {
	t.Helper()
	var want srtlaunch.PowerTelemetry
	data, err := os.ReadFile(filepath.Join(dir, "power-collector.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &want))
	perf, err := s.ledger().Perf(context.Background(), sweepID)
	require.NoError(t, err)
	for _, r := range perf {
		require.NotNil(t, r.Power, r.PointID)
		assert.True(t, r.Power.Simulated, r.PointID)
		if r.PointID != pointID {
			assert.Equal(t, energy.SourceSimulated, r.Power.Source, "%s: no telemetry, the model", r.PointID)
			continue
		}
		f := r.Power
		t.Logf("%s power: %+v", r.PointID, *f)
		assert.Equal(t, energy.SourceDCGM, f.Source, "read from the collector's samples.csv")
		require.True(t, f.Valid, f.Reason())
		assert.Equal(t, len(want.Devices), f.ExpectedGPUs)
		assert.Equal(t, len(want.Devices), f.ObservedGPUs)
		// The simulated exporters' board power stays between the model's
		// idle draw and the board limit.
		assert.GreaterOrEqual(t, f.AvgPowerW, energy.SimulatedGB200.IdleW*0.99)
		assert.LessOrEqual(t, f.P90PowerW, energy.SimulatedGB200.BoardLimitW)
		assert.Greater(t, f.JoulesPerOutputToken, 0.0)
		assert.Greater(t, f.PrefillGPUEnergyJ, 0.0, "1P1D: the prefill share")
		assert.Greater(t, f.DecodeGPUEnergyJ, 0.0, "1P1D: the decode share")
		assert.InDelta(t, f.TotalGPUEnergyJ, f.PrefillGPUEnergyJ+f.DecodeGPUEnergyJ, 1e-6)
		return
	}
	t.Fatalf("no perf row for the telemetry point %s", pointID)
}

// logHas requires a line of a role's log to contain want.
func logHas(t *testing.T, path, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), want, path)
}

// checkPower: the collector (launched beside the bring-up, stopped first at
// teardown) wrote samples.csv with rows for exactly the GPUs the render
// expects, every one from the simulated exporters, and a terminal manifest
// whose devices match; the render's collector settings are the ones the
// launch used.
func checkPower(t *testing.T, dir string, procs []*srtlaunch.Process) {
	t.Helper()
	var want srtlaunch.PowerTelemetry
	data, err := os.ReadFile(filepath.Join(dir, "power-collector.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &want))
	nodes := map[string]bool{}
	for _, p := range procs {
		if p.Role == srtlaunch.RolePrefill || p.Role == srtlaunch.RoleDecode {
			nodes[p.Nodelist[0]] = true
		}
	}
	require.Len(t, want.Nodes, len(nodes), "one exporter per worker node")
	require.Len(t, want.Devices, 4*len(nodes), "every GPU of the worker nodes is expected")

	rows, reasons, err := energy.ReadSamples(filepath.Join(want.Dir, power.SamplesFile))
	require.NoError(t, err)
	require.Empty(t, reasons)
	require.NotEmpty(t, rows)
	got := map[string]int{}
	for _, r := range rows {
		got[r.Hostname+"/"+string(rune('0'+r.GPUIndex))]++
		require.Greater(t, r.PowerW, 0.0)
	}
	for _, d := range want.Devices {
		assert.Greater(t, got[d.Hostname+"/"+string(rune('0'+d.GPUIndex))], 1, "%s GPU %d sampled repeatedly", d.Hostname, d.GPUIndex)
	}
	assert.Len(t, got, len(want.Devices), "no GPU the workers do not hold")

	if out, err := os.ReadFile(filepath.Join(dir, "power_collector.out")); err == nil {
		t.Logf("power collector:\n%s", out)
	}
	var m power.Manifest
	data, err = os.ReadFile(filepath.Join(want.Dir, power.ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, "complete", m.Status, "terminal: the collector finalized before the exporters stopped (%v)", m.ReasonCodes)
	assert.True(t, m.Simulated)
	assert.Equal(t, len(rows), m.SampleRowCount)
	assert.Len(t, m.ObservedDevices, len(want.Devices))
	assert.NotContains(t, m.ReasonCodes, power.ReasonExpectedMissing)
	assert.NotContains(t, m.ReasonCodes, power.ReasonUnexpectedDevice)
	// No SA-Bench ran (perf used the load generator), so no measurement
	// window: srt-slurm's gate keeps such artifacts unpublished.
	assert.Contains(t, m.ReasonCodes, power.ReasonWindowMissing)
	logHas(t, filepath.Join(dir, "power_collector.out"), "power: every expected GPU reported")
}
