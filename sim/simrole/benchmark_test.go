package simrole

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// TestPlanBenchmarkSeeds: the simulated benchmark replays with the seeds
// the perf activity gives it (the point's, recorded in its measurement
// profile), and with the former fixed 42 / 42+conc only when none is given.
func TestPlanBenchmarkSeeds(t *testing.T) {
	env := map[string]string{"MODEL": "m", "MODEL_PREFIX": "dsv4", "FRAMEWORK": "sglang", "PRECISION": "fp4",
		"CONC": "8", "RESULT_FILENAME": "r", "DURATION": "600"}
	get := func(k string) string { return env[k] }
	p, err := PlanBenchmark(get)
	require.NoError(t, err)
	assert.Nil(t, p.Seed, "42 + conc per point")
	assert.EqualValues(t, 42, p.TraceSeed)

	env[simenv.EnvSeed], env[simenv.EnvTraceSeed] = "123456789", "7"
	p, err = PlanBenchmark(get)
	require.NoError(t, err)
	require.NotNil(t, p.Seed)
	assert.EqualValues(t, 123456789, *p.Seed)
	assert.EqualValues(t, 7, p.TraceSeed)

	env[simenv.EnvSeed] = "x"
	_, err = PlanBenchmark(get)
	assert.EqualError(t, err, `SWEEPFLOW_SIM_SEED="x": want an integer`)
}
