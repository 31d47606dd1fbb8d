package workers

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

func TestRefuseSimOnlyOnRealClusters(t *testing.T) {
	profile := filepath.Join("..", "..", "configs", "clusters", "gb200-nvl72.yaml")
	real, err := config.LoadCluster(profile)
	require.NoError(t, err)
	emu, err := config.LoadCluster(filepath.Join("..", "..", "configs", "clusters", "slurm-emu.yaml"))
	require.NoError(t, err)
	defaults := Config{ClusterFile: profile, SimTimeScale: 1, SimAccuracy: 0.95, SimSlowdown: 1}
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"defaults", func(*Config) {}, ""},
		{"time scale", func(c *Config) { c.SimTimeScale = 0.05 }, "--sim-time-scale 0.05"},
		{"demo perf window", func(c *Config) { c.PerfDuration = 20 * time.Second }, "--perf-duration 20s"},
		{"slowdown", func(c *Config) { c.SimSlowdown = 1.2 }, "--sim-slowdown 1.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults
			tc.set(&c)
			err := c.refuseSimOnly(real)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "configs/clusters/gb200-nvl72.yaml: cluster gb200-nvl72 runs real engines: "+tc.want+" only apply to simulated clusters")
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.NoError(t, c.refuseSimOnly(emu), "the emulated partition takes simulator settings")
		})
	}
}
