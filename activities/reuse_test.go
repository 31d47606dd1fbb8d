package activities

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestLookupReuseActivity runs the reuse lookup as Temporal runs it. Sweep
// "first" measured c4 and c8 of one deployment on the simulator (uploaded
// and recorded through the activities); a point of sweep "second" reuses
// only an output of its own identity measured with its own profile, and
// says why not otherwise.
func TestLookupReuseActivity(t *testing.T) {
	sim := newLedgerActs(t)
	sim.Simulated, sim.Engine, sim.Load.TimeScale, sim.Load.Seed = true, "simulator", 0.01, 1
	sim.GSM8K.DefaultFloor = 0.9

	seed := newActivityEnv(sim)
	for conc, tput := range map[int]float64{4: 400, 8: 800} {
		p := testSpec("first", "d", conc)
		_, err := seed.ExecuteActivity(sim.Upload, UploadInput{Point: p,
			Perf: &point.PerfSummary{OutputTputPerGPU: tput, Requests: 64, Simulated: true},
			Eval: &point.EvalSummary{EMStrict: 0.92, EMFlexible: 0.93, NEff: 12, Floor: 0.9, Passed: true, Simulated: true}})
		require.NoError(t, err)
		_, err = seed.ExecuteActivity(sim.RecordPoint, PointRecord{Point: p, Status: "completed", At: time.Unix(1, 0)})
		require.NoError(t, err)
	}

	real := *sim
	real.Simulated, real.Engine = false, "srtctl"
	slower := *sim
	slower.Load.TimeScale = 1

	tests := []struct {
		name     string
		acts     *Activities
		point    point.Spec
		from     []string
		wantPerf float64 // 0: nothing reused
		wantEval bool
		wantNote string // in the notes; "" means no notes
	}{
		{name: "exact match at c4 reuses c4's figures", acts: sim, point: testSpec("second", "d", 4), wantPerf: 400, wantEval: true},
		{name: "exact match at c8 reuses c8's figures", acts: sim, point: testSpec("second", "d", 8), wantPerf: 800, wantEval: true},
		{name: "a concurrency the first sweep did not measure gets nothing", acts: sim, point: testSpec("second", "d", 16),
			wantNote: "perf not reused: no output for identity " + testSpec("", "d", 16).Identity},
		{name: "another deployment at the same exp-name and concurrency", acts: sim, point: testSpec("second", "e", 4),
			wantNote: "perf not reused: point identity differs from first's"},
		{name: "simulated figures never stand in for a real engine", acts: &real, point: testSpec("second", "d", 4),
			wantNote: "perf not reused: stored output is simulated"},
		{name: "another time scale is another measurement profile", acts: &slower, point: testSpec("second", "d", 8),
			wantNote: "perf not reused: measurement profile differs: time_scale 0.01 -> 1"},
		{name: "only the sweeps asked for are searched", acts: sim, point: testSpec("second", "d", 4), from: []string{"other"},
			wantNote: "no output for identity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.from
			if from == nil {
				from = []string{"first"}
			}
			env := newActivityEnv(tc.acts)
			val, err := env.ExecuteActivity(tc.acts.LookupReuse, ReuseRequest{Point: tc.point, Stages: point.ReusableStages(), FromSweeps: from})
			require.NoError(t, err)
			var got Reused
			require.NoError(t, val.Get(&got))

			notes := strings.Join(got.Notes, "\n")
			if tc.wantNote == "" {
				assert.Empty(t, got.Notes)
			} else {
				assert.Contains(t, notes, tc.wantNote)
			}
			if tc.wantPerf == 0 {
				assert.Nil(t, got.Perf)
				assert.Empty(t, got.PerfSweep)
			} else {
				require.NotNil(t, got.Perf)
				assert.Equal(t, tc.wantPerf, got.Perf.OutputTputPerGPU)
				assert.Equal(t, "first", got.PerfSweep)
				assert.NotEmpty(t, got.PerfRun, "the run that measured it")
			}
			if tc.wantEval {
				require.NotNil(t, got.Eval)
				assert.True(t, got.Eval.Passed)
				assert.Equal(t, 0.9, got.Eval.Floor, "re-gated on the current floor")
				assert.Equal(t, "first", got.EvalSweep)
			} else {
				assert.Nil(t, got.Eval)
				assert.Contains(t, notes, "eval not reused: ")
			}
		})
	}
}

// TestReuseHonoursHowThePointEnded: a figure measured after an operator
// skipped the warmup is stored with "warmup: skipped" in its profile, and
// a rerun reuses a stored output only when the point that measured it ran
// to its end (completed or eval-failed).
func TestReuseHonoursHowThePointEnded(t *testing.T) {
	sim := newLedgerActs(t)
	sim.Simulated, sim.Engine, sim.Load.TimeScale, sim.Load.Seed = true, "simulator", 0.01, 1
	sim.GSM8K.DefaultFloor = 0.9
	env := newActivityEnv(sim)
	record := func(sweep string, p point.Spec, status string) {
		p.SweepID = sweep
		_, err := env.ExecuteActivity(sim.Upload, UploadInput{Point: p, Perf: &point.PerfSummary{OutputTputPerGPU: 400, Requests: 64, Simulated: true}})
		require.NoError(t, err)
		_, err = env.ExecuteActivity(sim.RecordPoint, PointRecord{Point: p, Status: status, At: time.Unix(1, 0)})
		require.NoError(t, err)
	}
	lookup := func(from string, conc int) Reused {
		val, err := env.ExecuteActivity(sim.LookupReuse, ReuseRequest{Point: testSpec("next", "d", conc), Stages: []string{point.StagePerf}, FromSweeps: []string{from}})
		require.NoError(t, err)
		var got Reused
		require.NoError(t, val.Get(&got))
		return got
	}

	// Warmup skipped by an operator: the truth is in the stored profile.
	cold := testSpec("", "d", 4)
	cold.WarmupSkipped = true
	record("cold", cold, "incomplete")
	so, ok, err := sim.Store.StageOutput(context.Background(), "cold", cold.Identity, point.StagePerf)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Contains(t, string(so.ProfileJSON), `"warmup":"skipped"`)
	got := lookup("cold", 4)
	assert.Nil(t, got.Perf)
	assert.Contains(t, strings.Join(got.Notes, "\n"), "perf not reused: measurement profile differs: warmup skipped -> 2xconc")

	// Same profile, but the producing point failed, or ended incomplete.
	for _, status := range []string{"failed", "incomplete", "aborted"} {
		record(status, testSpec("", "d", 4), status)
		got := lookup(status, 4)
		assert.Nil(t, got.Perf, status)
		assert.Equal(t, []string{"perf not reused: the point that measured it in " + status + " ended " + status}, got.Notes)
	}
	// A point that ran to its end vouches for its figures.
	for _, status := range []string{"completed", "eval-failed"} {
		record(status, testSpec("", "d", 8), status)
		got := lookup(status, 8)
		require.NotNil(t, got.Perf, status)
		assert.Equal(t, 400.0, got.Perf.OutputTputPerGPU)
		assert.Empty(t, got.Notes)
	}
}
