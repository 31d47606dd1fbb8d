package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// TestForecastMasterReference forecasts every GB200 and GB300 key of
// InferenceX's shared master config on our two profiles. As shipped, the
// checkout holds none of the recipes those keys name: every key is left out
// with its reason (recipe not found, or a runner label, gb300-nv, that
// neither profile serves) and nothing is forecast. With recipes written
// from the rows, the keys that plan and pass the check run through the
// sweep workflow on both racks. The time is `starter bench forecast`'s to
// print (docs/performance.md), not asserted here.
func TestForecastMasterReference(t *testing.T) {
	dir := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml")
	f := ForecastMaster{InferenceX: dir, Clusters: []string{"../configs/clusters/gb200-nvl72.yaml", "../configs/clusters/gb300-nvl72.yaml"},
		Keys: []string{"*gb200*", "*gb300*"}, Sized: true, Runs: 1}
	require.NoError(t, f.Validate())
	var out bytes.Buffer
	runs, err := f.Run(context.Background(), &out)
	require.NoError(t, err, out.String())
	require.Len(t, runs, 2)
	t.Log("\n" + out.String())

	shipped := runs[0].Report
	require.Equal(t, 58, runs[0].Keys)
	// The shipped GB200 and GB300 profiles serve every key's runner label
	// (gb300-nv included).
	assert.Empty(t, shipped.NotServed)
	left := map[string]bool{}
	for _, c := range shipped.Clusters {
		assert.Zero(t, c.Points, c.Name)
		assert.Zero(t, c.NodeHours, c.Name)
		for _, f := range c.NotForecast {
			assert.Equal(t, forecast.FindingNoPlan, f.Kind, f.Key)
			if !strings.Contains(f.Reason, "a shell launcher, not an srt-slurm recipe") {
				assert.Contains(t, f.Reason, "not found under recipes root", f.Key)
			}
			left[f.Key] = true
		}
	}
	assert.Len(t, left, 58, "every key is said to be left out, once")

	sized := runs[1].Report
	assert.Empty(t, sized.NotServed)
	for _, c := range sized.Clusters {
		assert.Positive(t, c.Points, c.Name)
		assert.InDelta(t, 4*c.NodeHours, c.GPUHours, 1e-6, c.Name)
		assert.GreaterOrEqual(t, c.MakespanHours, c.LowerBoundHours, c.Name)
		assert.GreaterOrEqual(t, c.LowerBoundHours, c.NodeHours/18-1e-9, c.Name)
		assert.NotEmpty(t, c.CriticalPath, c.Name)
		assert.Equal(t, c.MakespanHours, c.CriticalPath[len(c.CriticalPath)-1].EndHours, c.Name)
	}
}
