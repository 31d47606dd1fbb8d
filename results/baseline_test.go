package results

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

func TestNightlyBaselines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		night := func(d int) time.Time { return time.Date(2026, 11, d, 2, 0, 0, 0, time.UTC) }
		perf := func(sweep, pointID string, tput float64) {
			require.NoError(t, s.PutPerf(ctx, PerfResult{SweepID: sweep, PointID: pointID, Identity: "id-" + pointID, Conc: 4, PerfSummary: point.PerfSummary{OutputTputPerGPU: tput}}))
		}
		// Night 1 completes, night 2 fails, night 3 is the one compared.
		perf("n1", "p", 100)
		perf("n3", "p", 90)
		require.NoError(t, s.PutEval(ctx, EvalResult{SweepID: "n1", PointID: "p", Identity: "fp-n1", EMStrict: 0.9, Passed: true}))
		require.NoError(t, s.PutNightlyPoints(ctx, []NightlyPoint{
			{SweepID: "n1", PointID: "p", BaselineKey: "k-c4", Status: "completed", Night: night(1)},
			{SweepID: "n2", PointID: "p", BaselineKey: "k-c4", Status: "failed", Night: night(2)},
			{SweepID: "n3", PointID: "p", BaselineKey: "k-c4", Status: "completed", Night: night(3)},
			{SweepID: "n3", PointID: "q", BaselineKey: "other-c4", Status: "completed", Night: night(3)},
		}))
		// Idempotent: a retried activity writes the same rows again.
		require.NoError(t, s.PutNightlyPoints(ctx, []NightlyPoint{{SweepID: "n1", PointID: "p", BaselineKey: "k-c4", Status: "completed", Night: night(1)}}))

		cases := []struct {
			name          string
			key           string
			before        time.Time
			exclude       string
			completedOnly bool
			wantSweep     string
		}{
			{"last completed before night 3", "k-c4", night(3), "n3", true, "n1"},
			{"previous night whatever its outcome", "k-c4", night(3), "n3", false, "n2"},
			{"a backfill of night 2 compares with night 1", "k-c4", night(2), "n2", true, "n1"},
			{"nothing before night 1", "k-c4", night(1), "n1", true, ""},
			{"unknown key", "nope-c4", night(9), "", true, ""},
			{"later night sees night 3", "k-c4", night(4), "n4", true, "n3"},
		}
		for _, tc := range cases {
			b, ok, err := s.LatestNightly(ctx, tc.key, tc.before, tc.exclude, tc.completedOnly)
			require.NoError(t, err, tc.name)
			if tc.wantSweep == "" {
				assert.False(t, ok, tc.name)
				continue
			}
			require.True(t, ok, tc.name)
			assert.Equal(t, tc.wantSweep, b.SweepID, tc.name)
		}

		p, ok, err := s.LatestNightlyPerf(ctx, "k-c4", night(3), "n3")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, 100.0, p.OutputTputPerGPU)
		b, ok, err := s.LatestNightly(ctx, "k-c4", night(3), "n3", true)
		require.NoError(t, err)
		require.True(t, ok)
		require.NotNil(t, b.Eval)
		assert.Equal(t, 0.9, b.Eval.EMStrict)
		assert.Equal(t, night(1), b.Night.UTC())

		// A pinned sweep: by key among its nightly points, else its points.
		b, ok, err = s.PinnedBaseline(ctx, "n1", "k-c4")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "p", b.PointID)
		require.NoError(t, s.UpsertPoint(ctx, Point{SweepID: "manual", PointID: "p", BaselineKey: "k-c4", Status: "completed"}))
		perf("manual", "p", 120)
		b, ok, err = s.PinnedBaseline(ctx, "manual", "k-c4")
		require.NoError(t, err)
		require.True(t, ok)
		require.NotNil(t, b.Perf)
		assert.Equal(t, 120.0, b.Perf.OutputTputPerGPU)
		_, ok, err = s.PinnedBaseline(ctx, "manual", "k-c8")
		require.NoError(t, err)
		assert.False(t, ok)

		assert.ErrorContains(t, s.PutNightlyPoints(ctx, []NightlyPoint{{SweepID: "x", PointID: "y"}}), "baseline key")
	})
}

func TestRegressionReports(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		_, ok, err := s.GetRegressionReport(ctx, "n1")
		require.NoError(t, err)
		assert.False(t, ok)
		r := RegressionReport{SweepID: "n1", NightlyID: "nightly-1", Baseline: "latest-nightly", Findings: 1, JSON: []byte(`{"findings":[1]}`), ArtifactURI: "file:///x"}
		require.NoError(t, s.PutRegressionReport(ctx, r))
		r.Findings = 2
		require.NoError(t, s.PutRegressionReport(ctx, r))
		got, ok, err := s.GetRegressionReport(ctx, "n1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, 2, got.Findings)
		assert.JSONEq(t, `{"findings":[1]}`, string(got.JSON))
		assert.Equal(t, "nightly-1", got.NightlyID)
		assert.ErrorContains(t, s.PutRegressionReport(ctx, RegressionReport{SweepID: "n2", JSON: []byte("{")}), "not valid JSON")
	})
}
