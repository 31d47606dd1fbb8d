package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/point"
)

// seedShape is the seed sweep's shape: six deployments, the 2P1D one with
// three concurrencies and one eval; every perf run lasts 60 min.
func seedShape() *Plan {
	type pt struct {
		dep   string
		nodes int
		conc  int
		eval  bool
	}
	p := &Plan{Cluster: &config.Cluster{Path: "/x/c.yaml"}}
	for i, x := range []pt{{"a", 2, 1, false}, {"b", 2, 4, false}, {"c", 6, 64, true}, {"d", 6, 128, true},
		{"e", 12, 256, true}, {"f", 16, 768, false}, {"f", 16, 1024, false}, {"f", 16, 1280, true}} {
		p.Points = append(p.Points, Point{Index: i, ID: x.dep + string(rune('0'+i)), DeploymentHash: x.dep, Topology: x.dep,
			Nodes: x.nodes, Conc: x.conc, Eval: x.eval, DurationSec: 3600})
	}
	return p
}

func TestNodeMinutes(t *testing.T) {
	times := NodeMinuteTimes{BringUp: 20 * time.Minute, Warmup: 5 * time.Minute, Eval: 10 * time.Minute}
	rep, err := NodeMinutes(seedShape(), times)
	require.NoError(t, err)
	require.Len(t, rep.Groups, 6)
	assert.Equal(t, 6, rep.SharedPerfBringUps)
	assert.Equal(t, 8, rep.PerPointPerfBringUps)
	assert.Equal(t, 4, rep.SharedEvalRestarts)
	assert.Equal(t, 4, rep.PerPointEvalRestarts)
	// 2P1D shared: 16 x (20 + 3 x (5 + 60) + 20 + 10) = 3920;
	// per point: 16 x ((20+65) + (20+65) + (20+65+20+10)) = 4560.
	g := rep.Groups[5]
	assert.Equal(t, []int{768, 1024, 1280}, g.Concs)
	assert.InDelta(t, 3920, g.Shared, 1e-9)
	assert.InDelta(t, 4560, g.PerPoint, 1e-9)
	// A one-point deployment costs the same either way: 6 x (20+65+20+10).
	assert.InDelta(t, 690, rep.Groups[2].Shared, 1e-9)
	assert.InDelta(t, 690, rep.Groups[2].PerPoint, 1e-9)
	assert.InDelta(t, 7020, rep.Shared, 1e-9)
	assert.InDelta(t, 7660, rep.PerPoint, 1e-9)
	assert.InDelta(t, 640, rep.Saved, 1e-9)
	assert.InDelta(t, 7660.0/7020.0, rep.Ratio, 1e-12)
	assert.InDelta(t, 640.0/7660.0, rep.SavedShare, 1e-12)
}

func TestNodeMinutesErrors(t *testing.T) {
	_, err := NodeMinutes(seedShape(), NodeMinuteTimes{Warmup: time.Minute})
	require.ErrorContains(t, err, "set bring-up-time in cluster profile /x/c.yaml")
	p := seedShape()
	p.Points[3].DurationSec = 0
	_, err = NodeMinutes(p, NodeMinuteTimes{BringUp: time.Minute})
	require.ErrorContains(t, err, "matrix row has no duration")
	_, err = NodeMinutes(seedShape(), NodeMinuteTimes{BringUp: time.Minute, Eval: -time.Minute})
	require.ErrorContains(t, err, "must not be negative")
}

// TestPointAlone pins the per-point figure a canary sweep weighs its points
// by: the per-point column of NodeMinutes, point by point.
func TestPointAlone(t *testing.T) {
	times := DefaultNodeMinuteTimes(20 * time.Minute)
	require.Equal(t, NodeMinuteTimes{BringUp: 20 * time.Minute, Warmup: 5 * time.Minute, Eval: 10 * time.Minute}, times)
	p := seedShape()
	rep, err := NodeMinutes(p, times)
	require.NoError(t, err)
	for _, g := range rep.Groups {
		sum := 0.0
		for _, bg := range p.BringUpGroups() {
			if bg.Group != g.Group {
				continue
			}
			for _, i := range bg.Points {
				pt := p.Points[i]
				sum += times.PointAlone(point.Spec{Nodes: pt.Nodes, DurationSec: pt.DurationSec, Eval: pt.Eval})
			}
		}
		assert.InDelta(t, g.PerPoint, sum, 1e-9, "group %d", g.Group)
	}
	// 6 x (20 + 5 + 60 + 20 + 10), 2 x (20 + 5 + 60); an eval-only point
	// holds its nodes for the eval-mode bring-up and the eval: 6 x (20 + 10).
	assert.InDelta(t, 690, times.PointAlone(point.Spec{Nodes: 6, DurationSec: 3600, Eval: true}), 1e-9)
	assert.InDelta(t, 170, times.PointAlone(point.Spec{Nodes: 2, DurationSec: 3600}), 1e-9)
	assert.InDelta(t, 180, times.PointAlone(point.Spec{Nodes: 6, DurationSec: 3600, Eval: true, Profile: point.Profile{EvalOnly: true}}), 1e-9)
}
