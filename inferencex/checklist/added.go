package checklist

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/point"
)

// Added is a point an adaptive search added to a sweep (point.Added): its
// config key, concurrency and matrix row (the row of its deployment at its
// concurrency).
type Added struct {
	PointID   string          `json:"point_id"`
	ConfigKey string          `json:"config_key"`
	Conc      int             `json:"conc"`
	Row       json.RawMessage `json:"row"`
}

// added checks the sweep's added points against InferenceX's append-only
// convention, as if each were appended to the conc-list of the search
// entry its deployment comes from: it must be a new concurrency of a row
// the master config has (same image, recipe and settings: the
// deployment), never one of the row's points again, and at or below the
// concurrency its recipe claims.
func (c *checker) added() {
	if len(c.opts.Added) == 0 {
		return
	}
	c.ranRule(RuleAppendOnly)
	deps := make([]string, len(c.rows))
	for i, r := range c.rows {
		raw, err := r.MarshalJSON()
		if err == nil {
			deps[i], _ = point.RowDeployment(raw)
		}
	}
	for _, a := range c.opts.Added {
		dep, err := point.RowDeployment(a.Row)
		if err != nil {
			c.add(Finding{Rule: RuleAppendOnly, ConfigKey: a.ConfigKey, Field: a.PointID, Got: fmt.Sprintf("added point %s: unreadable row (%v)", a.PointID, err),
				Want: "the matrix row of its deployment"})
			continue
		}
		var rows []*matrix.Row
		for i, r := range c.rows {
			if r.ConfigKey == a.ConfigKey && deps[i] == dep {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			var pos strictyaml.Pos
			if e := c.master.Entry(a.ConfigKey); e != nil {
				pos = e.Pos
			}
			c.add(Finding{Rule: RuleAppendOnly, Pos: pos, ConfigKey: a.ConfigKey, Field: a.ConfigKey,
				Got:  fmt.Sprintf("added point %s c%d on a deployment no row of %s has", a.PointID, a.Conc, a.ConfigKey),
				Want: "added points only on a deployment of the master config (same image, recipe and settings)"})
			continue
		}
		r := rows[0]
		pos, field := r.Search.Pos, r.Search.Path+".conc-list"
		if len(r.Search.ConcListPos) > 0 {
			pos = r.Search.ConcListPos[len(r.Search.ConcListPos)-1]
		}
		if slices.ContainsFunc(rows, func(r *matrix.Row) bool { return slices.Contains(r.Conc(), a.Conc) }) {
			c.add(Finding{Rule: RuleAppendOnly, Pos: pos, Field: field, ConfigKey: a.ConfigKey,
				Got:  fmt.Sprintf("added point %s runs c%d, a point the row has (%s)", a.PointID, a.Conc, r.ExpName()),
				Want: "an added point never re-runs an existing point"})
			continue
		}
		if rv := c.recipe(r); rv != nil {
			if claim := ClaimedConc(rv.Recipe); claim > 0 && a.Conc > claim {
				c.add(Finding{Rule: RuleRecipeRow, Pos: pos, Field: field, ConfigKey: a.ConfigKey,
					Got:  fmt.Sprintf("added point %s conc %d", a.PointID, a.Conc),
					Want: fmt.Sprintf("conc %d at the top of the row, as recipe %s claims (an added point stays at or below it)", claim, rv.Path)})
			}
		}
	}
}
