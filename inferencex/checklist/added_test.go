package checklist

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/point"
)

// seedAdded is an added point of the seed sweep: the row of its planned
// point at conc `from` of the named exp-name prefix, at conc.
func seedAdded(t *testing.T, o Options, topo string, from, conc int) Added {
	t.Helper()
	master, err := ixconfig.LoadMaster(o.ConfigFiles...)
	require.NoError(t, err)
	runners, err := ixconfig.LoadRunners(o.RunnerConfig)
	require.NoError(t, err)
	rows, err := matrix.Generate(master, runners, matrix.Options{Keys: o.ConfigKeys})
	require.NoError(t, err)
	for _, r := range rows {
		raw, err := r.MarshalJSON()
		require.NoError(t, err)
		if r.Conc()[0] != from || !json.Valid(raw) {
			continue
		}
		if e := r.ExpName(); len(e) < len(topo) || e[:len(topo)] != topo {
			continue
		}
		s := point.Spec{PointID: r.ExpName(), ExpName: r.ExpName(), Conc: from, DeploymentHash: "d", Row: raw}
		a, err := s.AtConc(conc)
		require.NoError(t, err)
		return Added{PointID: a.PointID, ConfigKey: r.ConfigKey, Conc: conc, Row: a.Row}
	}
	t.Fatalf("no seed row %s c%d", topo, from)
	return Added{}
}

// TestCheckAddedPoints: the seed sweep with points added as InferenceX's
// append-only convention allows passes; re-running a point, going above
// the recipe's claimed concurrency or adding to a deployment the master
// config does not have fails, with the rule and the point named.
func TestCheckAddedPoints(t *testing.T) {
	sw, err := config.LoadSweep("../../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	var o Options
	require.NoError(t, o.FromSweep(sw, "", false))
	o.Today = today
	base, err := Check(o)
	require.NoError(t, err)
	require.Zero(t, base.Failures(), "%v", base.Findings)

	const twoP, oneP = "dsv4_p2x16ep16dpa_d1x32ep32dpa", "dsv4_p1x16ep16dpa_d1x32ep32dpa"
	ok := o
	ok.Added = []Added{seedAdded(t, o, twoP, 768, 443), seedAdded(t, o, twoP, 768, 612), seedAdded(t, o, oneP, 256, 200)}
	rep, err := Check(ok)
	require.NoError(t, err)
	assert.Zero(t, rep.Failures(), "%v", rep.Findings)
	assert.Contains(t, rep.Rules, RuleAppendOnly)

	cases := []struct {
		name      string
		add       Added
		rule, got string
	}{
		{"re-runs a point", seedAdded(t, o, twoP, 768, 1024), RuleAppendOnly, "runs c1024, a point the row has"},
		{"above the recipe's claim", seedAdded(t, o, oneP, 256, 443), RuleRecipeRow, "conc 443; want conc 256 at the top of the row"},
	}
	other := seedAdded(t, o, twoP, 768, 500)
	other.Row = json.RawMessage(string(other.Row[:len(other.Row)-1]) + `,"extra":1}`)
	cases = append(cases, struct {
		name      string
		add       Added
		rule, got string
	}{"a deployment the master does not have", other, RuleAppendOnly, "on a deployment no row of"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := o
			bad.Added = []Added{tc.add}
			rep, err := Check(bad)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Failures(), "%v", rep.Findings)
			f := rep.Findings[0]
			assert.Equal(t, tc.rule, f.Rule)
			assert.Contains(t, f.String(), tc.got)
			assert.Contains(t, f.String(), tc.add.PointID)
			assert.Contains(t, f.String(), "dsv4-gb200-agentx.yaml:", "the finding names the master config's line")
		})
	}
}
