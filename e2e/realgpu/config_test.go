package realgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/plan"
)

// The real-GPU run's files plan as the run needs them, without a GPU: the
// local-gpu profile starts server.py (a real engine, not the simulator),
// the sweep has conc 1 and 16 at 8k1k with GSM8K at 16, and its model
// prefix has a floor of 0; the smoke sweep the same shape without eval.
func TestRunFilesPlan(t *testing.T) {
	t.Setenv("SWEEPFLOW_DATA_DIR", "/data")
	for file, want := range map[string]struct {
		concs     []int
		isl, osl  int
		evalConcs []int
	}{
		"sweep.yaml":       {[]int{1, 16}, 8192, 1024, []int{16}},
		"sweep-smoke.yaml": {[]int{1, 8}, 8192, 128, nil},
	} {
		s, err := config.LoadSweep(file)
		require.NoError(t, err, file)
		c, err := config.LoadCluster(s.ClusterPath)
		require.NoError(t, err)
		assert.False(t, c.Simulated(), "a real engine")
		server, err := filepath.Abs("server.py")
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(c.ServeCommand), 2)
		assert.Equal(t, server, c.ServeCommand[1])
		_, err = os.Stat(c.ServeCommand[1])
		require.NoError(t, err)
		assert.Contains(t, c.ServeCommand, "{checkpoint}")

		p, err := plan.Build(plan.Options{Sweep: s, Cluster: c})
		require.NoError(t, err, file)
		var concs, evals []int
		for _, pt := range p.Points {
			concs = append(concs, pt.Conc)
			if pt.Eval {
				evals = append(evals, pt.Conc)
			}
			assert.Equal(t, 1, pt.GPUs)
			assert.Equal(t, want.isl, pt.ISL, file)
			assert.Equal(t, want.osl, pt.OSL, file)
		}
		for _, spec := range plan.PointSpecs(p, c, s.Evals) {
			assert.Equal(t, "/data/local-gpu/nvme/models/random-llama-0.4b", spec.CheckpointPath, "staged from the shared root to each node")
			assert.Equal(t, "/data/local-gpu/shared/models/random-llama-0.4b", spec.CheckpointSource)
		}
		assert.Equal(t, want.concs, concs, file)
		assert.Equal(t, want.evalConcs, evals, file)
	}
	th, err := gsm8k.LoadThresholds("thresholds.yaml")
	require.NoError(t, err)
	floor, ok := th.Floor("gsm8k", "randllama")
	assert.True(t, ok)
	assert.Zero(t, floor, "random weights score about 0: the floor is 0")
}
