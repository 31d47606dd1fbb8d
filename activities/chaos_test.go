package activities

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// TestChaosFaultsHitTheFirstAttempt: a chaos fault is carried out by the
// stage's first Times attempts only: an engine crash and a hang as the
// bring-up's role environment (the hang with the cut health budget), a
// stream cut half the perf window in; --inject-fault's counting and error
// are untouched by them, and a real engine never gets one.
func TestChaosFaultsHitTheFirstAttempt(t *testing.T) {
	ctx := context.Background()
	a := &Activities{StateDir: filepath.Join(t.TempDir(), "state"), Simulated: true, Load: PerfConfig{Duration: 8 * time.Second, TimeScale: 1}}
	p := point.Spec{SweepID: "sw", PointID: "c64", DurationSec: 600, Faults: []point.Fault{
		{Stage: point.StageBringUp, Times: 1, Chaos: point.ChaosCrash + ":nccl"},
		{Stage: point.StagePerf, Times: 1, Chaos: point.ChaosStreamCut},
	}}
	require.NoError(t, a.injectFault(p, point.StageBringUp), "a chaos fault is not an InjectedFault")
	spec := cluster.ServeSpec{Env: map[string]string{}}
	require.NoError(t, a.chaosBringUp(ctx, p, &spec))
	assert.Equal(t, "nccl", spec.Env[simenv.EnvCrash])
	assert.Zero(t, spec.HealthBudget)
	again := cluster.ServeSpec{Env: map[string]string{}}
	require.NoError(t, a.chaosBringUp(ctx, p, &again))
	assert.Empty(t, again.Env, "the retry brings up cleanly")

	cut, err := a.chaosCut(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, 4*time.Second, cut, "half the 8 s window")
	cut, err = a.chaosCut(ctx, p)
	require.NoError(t, err)
	assert.Zero(t, cut)

	hang := point.Spec{SweepID: "sw", PointID: "c4", Faults: []point.Fault{{Stage: point.StageBringUp, Times: 1, Chaos: point.ChaosHang}}}
	spec = cluster.ServeSpec{Env: map[string]string{}}
	require.NoError(t, a.chaosBringUp(ctx, hang, &spec))
	assert.Equal(t, "hang", spec.Env[simenv.EnvCrash])
	assert.Equal(t, ChaosHangBudget, spec.HealthBudget)

	real := &Activities{StateDir: filepath.Join(t.TempDir(), "state")}
	spec = cluster.ServeSpec{Env: map[string]string{}}
	require.NoError(t, real.chaosBringUp(ctx, hang, &spec))
	assert.Empty(t, spec.Env, "never on a real engine")
	assert.Zero(t, spec.HealthBudget)
}
