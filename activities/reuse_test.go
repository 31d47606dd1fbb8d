package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/point"
)

func TestLookupReuse(t *testing.T) {
	ctx := context.Background()
	spec := func(sweep string, conc int) point.Spec {
		id := point.Identity{DeploymentHash: strings.Repeat("d", 64), Conc: conc}
		return point.Spec{SweepID: sweep, PointID: point.ID("x_1k1k", id), ExpName: "x_1k1k", ConfigKey: "k", Conc: conc,
			Identity: id.String(), ModelPrefix: "dsv4", Eval: true, ISL: 1024, OSL: 1024,
			Profile: point.Profile{Scenario: "fixed-seq-len", ISL: 1024, OSL: 1024, Eval: true, Backend: "local", Launcher: "local"}}
	}
	thresholds := func(floor string) *gsm8k.Thresholds {
		th, err := gsm8k.ParseThresholds([]byte("default:\n  gsm8k: 0.5\nmodels:\n  dsv4:\n    gsm8k: "+floor+"\n"), "t.yaml")
		require.NoError(t, err)
		return th
	}
	sim := newLedgerActs(t)
	sim.Simulated, sim.Load.TimeScale, sim.Load.Seed = true, 0.01, 1
	sim.GSM8K.Thresholds = thresholds("0.9")
	// The first sweep measured c4 and c8; each stage output is stored, and
	// each point completed (reuse honours how the producer ended).
	for conc, tput := range map[int]float64{4: 400, 8: 800} {
		p := spec("first", conc)
		require.NoError(t, sim.putStage(ctx, p, point.StagePerf, point.PerfSummary{OutputTputPerGPU: tput, Simulated: true}, nil, true, nil))
		require.NoError(t, sim.putStage(ctx, p, point.StageEval, point.EvalSummary{EMStrict: 0.92, EMFlexible: 0.93, NEff: 40, Floor: 0.9, Passed: true, Simulated: true}, nil, true, nil))
		require.NoError(t, sim.RecordPoint(ctx, PointRecord{Point: p, Status: "completed"}))
	}
	req := func(conc int) ReuseRequest {
		return ReuseRequest{Point: spec("second", conc), Stages: point.ReusableStages(), FromSweeps: []string{"first"}}
	}

	t.Run("each concurrency gets its own figures", func(t *testing.T) {
		for conc, tput := range map[int]float64{4: 400, 8: 800} {
			got, err := sim.LookupReuse(ctx, req(conc))
			require.NoError(t, err)
			require.NotNil(t, got.Perf)
			assert.Equal(t, tput, got.Perf.OutputTputPerGPU)
			assert.Equal(t, "first", got.PerfSweep)
		}
		got, err := sim.LookupReuse(ctx, req(16))
		require.NoError(t, err)
		assert.Nil(t, got.Perf, "no output for c16")
	})

	t.Run("a reused eval is gated on the current floor", func(t *testing.T) {
		got, err := sim.LookupReuse(ctx, req(4))
		require.NoError(t, err)
		require.NotNil(t, got.Eval)
		assert.True(t, got.Eval.Passed)
		// Floors are part of the eval profile, so a new floor reuses
		// nothing; re-gating is the last line of defence and is checked
		// directly.
		sim.GSM8K.Thresholds = thresholds("0.95")
		defer func() { sim.GSM8K.Thresholds = thresholds("0.9") }()
		regated := sim.regate(spec("second", 4), *got.Eval)
		assert.False(t, regated.Passed)
		assert.Equal(t, 0.95, regated.Floor)
		got, err = sim.LookupReuse(ctx, req(4))
		require.NoError(t, err)
		assert.Nil(t, got.Eval)
		assert.Contains(t, strings.Join(got.Notes, "\n"), "eval not reused: measurement profile differs: eval_floor 0.9 -> 0.95")
		assert.NotNil(t, got.Perf, "the perf profile does not depend on eval floors")
	})

	t.Run("simulated outputs never stand in for a real engine", func(t *testing.T) {
		real := *sim
		real.Simulated, real.Engine = false, "srtctl"
		got, err := real.LookupReuse(ctx, req(4))
		require.NoError(t, err)
		assert.Nil(t, got.Perf)
		assert.Nil(t, got.Eval)
		assert.Contains(t, strings.Join(got.Notes, "\n"), "perf not reused: stored output is simulated")
	})

	t.Run("another time scale is another profile", func(t *testing.T) {
		other := *sim
		other.Load.TimeScale = 1
		got, err := other.LookupReuse(ctx, req(8))
		require.NoError(t, err)
		assert.Nil(t, got.Perf)
		assert.Contains(t, strings.Join(got.Notes, "\n"), "time_scale 0.01 -> 1")
	})
}
