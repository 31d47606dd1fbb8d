package control

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/errtext"
)

const (
	seedSweep = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	clFixture = "testdata/changelog/perf-changelog.yaml"
)

// TestChangelogEntryPlansSeedSweep: the fixture's entry 1 names the seed
// keys by glob; the sweep it builds is the seed sweep, point for point and
// with the same sweep ID (so a start from either attaches to one run).
func TestChangelogEntryPlansSeedSweep(t *testing.T) {
	want, _, err := Build(Request{SweepFile: seedSweep})
	require.NoError(t, err)
	got, p, err := Build(Request{SweepFile: seedSweep, Changelog: &ChangelogRef{Path: clFixture, Entry: 1}})
	require.NoError(t, err)
	assert.Equal(t, want.SweepID, got.SweepID)
	require.Len(t, got.Points, 8)
	assert.Equal(t, want.Points, got.Points)
	assert.Equal(t, 4, p.Evals())
}

func TestChangelogFlagsShapeSweep(t *testing.T) {
	tests := []struct {
		name         string
		entry, since int
		points       int
		evals        int
		evalOnly     int
		err          string
	}{
		{name: "no-evals agg entry", entry: 2, points: 2, evals: 0},
		// InferenceX's eval selection of the disagg key: one row per
		// parallelism key at its highest conc >= 16, each an eval-only point.
		{name: "evals-only entry", entry: 3, points: 4, evals: 4, evalOnly: 4},
		{name: "scenario filter selects nothing", entry: 4, err: "generate no rows"},
		// Entry 1 claims the disagg key for throughput first: its evals
		// ride on the perf points and nothing is eval-only.
		{name: "since 1 includes the evals-only entry", since: 1, points: 8, evals: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, p, err := Build(Request{SweepFile: seedSweep, Changelog: &ChangelogRef{Path: clFixture, Entry: tt.entry, Since: tt.since}})
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, errtext.FirstLineError(err).Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, in.Points, tt.points)
			assert.Equal(t, tt.evals, p.Evals())
			assert.Equal(t, tt.evalOnly, p.EvalOnlyPoints())
			for i, pt := range p.Points {
				spec := in.Points[i]
				assert.Equal(t, pt.EvalOnly, spec.Profile.EvalOnly, pt.ID)
				if pt.EvalOnly {
					assert.True(t, spec.Eval, "an eval-only point evals: %s", pt.ID)
					assert.Zero(t, spec.SyntheticAL, "eval-only points run real draft verification: %s", pt.ID)
					assert.Contains(t, string(pt.Row), `"eval-only":true`)
				}
			}
		})
	}
}

// TestChangelogEvalOnlyPoints: evals-only and all-evals entries plan
// eval-only points whose identities, baselines and profiles never meet a
// perf point's, so the ledger keeps them apart.
func TestChangelogEvalOnlyPoints(t *testing.T) {
	const clEvals = "testdata/changelog/evals.yaml"
	perf, pp, err := Build(Request{SweepFile: seedSweep})
	require.NoError(t, err)
	tests := []struct {
		name         string
		entry, since int
		concs        []int
	}{
		{name: "evals-only: the eval selection", entry: 1, concs: []int{64, 128, 256, 1280}},
		{name: "all-evals: every row", entry: 2, concs: []int{1, 4}},
		{name: "both", since: 1, concs: []int{64, 128, 256, 1280, 1, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, p, err := Build(Request{SweepFile: seedSweep, Changelog: &ChangelogRef{Path: clEvals, Entry: tt.entry, Since: tt.since}})
			require.NoError(t, err)
			require.Len(t, p.Points, len(tt.concs))
			assert.NotEqual(t, perf.SweepID, in.SweepID)
			assert.Zero(t, p.EvalRestarts(), "eval-only deployments come up in eval mode")
			for i, pt := range p.Points {
				assert.Equal(t, tt.concs[i], pt.Conc)
				assert.True(t, pt.EvalOnly && pt.Eval && in.Points[i].Eval && in.Points[i].Profile.EvalOnly, pt.ID)
				for _, q := range pp.Points {
					assert.NotEqual(t, q.Identity, pt.Identity)
					assert.NotEqual(t, q.BaselineKey, pt.BaselineKey)
					assert.NotEqual(t, q.ProfileHash, pt.ProfileHash)
				}
			}
		})
	}

}
