package changelog

import (
	"fmt"
	"slices"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// Matrix is the selection as InferenceX's changelog planner emits it for
// run-sweep.yml: throughput rows (--no-evals) in single_node and
// multi_node, bucketed by sequence length or "agentic"; eval rows
// (--evals-only, with --all-evals for all-evals entries, thinned by
// eval-min-prefill-ep) in evals, agentic_evals, multinode_evals and
// multinode_agentic_evals; and changelog_metadata with the entries. Eval
// rows are generated per entry for the (key, scenario) pairs it claims, as
// InferenceX does; base_ref and head_ref are empty (sweepflow reads the
// file, not a git diff).
func (s *Selection) Matrix(m *ixconfig.Master, r *ixconfig.Runners) (matrix.Object, error) {
	single, multi := matrix.Object{}, matrix.Object{}
	file := func(b *matrix.Object, name string, row *matrix.Row) {
		v, _ := b.Get(name)
		list, _ := v.([]any)
		b.Set(name, append(list, row.Fields))
	}
	if len(s.Throughput) > 0 {
		var keys []string
		for _, ks := range s.Throughput {
			keys = append(keys, ks.Key)
		}
		rows, err := matrix.Generate(m, r, matrix.Options{Keys: keys})
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if !s.KeepRow(row) {
				continue
			}
			b := &single
			if multinode(row) {
				b = &multi
			}
			name := "agentic"
			if row.Scenario != matrix.AgenticCoding {
				name = row.SeqLenName()
			}
			file(b, name, row)
		}
	}
	evals := map[string][]any{}
	for _, g := range s.evalGroups() {
		rows, err := matrix.Generate(m, r, matrix.Options{Keys: g.keys, ScenarioTypes: g.scenarios})
		if err != nil {
			return nil, err
		}
		sel := matrix.EvalRows(rows)
		if g.all {
			sel = matrix.AllEvalRows(rows)
		}
		for _, row := range sel {
			if g.minEP > 0 && multinode(row) && row.Search != nil && row.Search.Prefill != nil && row.Search.Prefill.EP < g.minEP {
				continue
			}
			bucket := "evals"
			switch {
			case multinode(row) && row.Scenario == matrix.AgenticCoding:
				bucket = "multinode_agentic_evals"
			case multinode(row):
				bucket = "multinode_evals"
			case row.Scenario == matrix.AgenticCoding:
				bucket = "agentic_evals"
			}
			evals[bucket] = append(evals[bucket], row.Fields)
		}
	}
	out := matrix.Object{{Key: "single_node", Value: single}, {Key: "multi_node", Value: multi}}
	for _, b := range []string{"evals", "agentic_evals", "multinode_evals", "multinode_agentic_evals"} {
		out = append(out, matrix.Field{Key: b, Value: append([]any{}, evals[b]...)})
	}
	var entries []any
	for _, e := range s.Entries {
		entries = append(entries, entryObject(e))
	}
	out = append(out, matrix.Field{Key: "changelog_metadata", Value: matrix.Object{
		{Key: "base_ref", Value: ""}, {Key: "head_ref", Value: ""}, {Key: "entries", Value: append([]any{}, entries...)}}})
	return out, nil
}

func multinode(r *matrix.Row) bool {
	v, ok := r.Fields.Get("prefill")
	return ok && v != nil
}

type evalGroup struct {
	keys, scenarios []string
	all             bool
	minEP           int
}

// evalGroups groups the eval selections by entry and claimed scenarios,
// in entry order: one generator call each, as InferenceX makes them.
func (s *Selection) evalGroups() []evalGroup {
	var out []evalGroup
	type gk struct {
		e    *ixconfig.ChangelogEntry
		scen string
	}
	at := map[gk]int{}
	for _, es := range s.Evals {
		k := gk{es.Entry, fmt.Sprint(es.Scenarios)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, evalGroup{scenarios: slices.Clone(es.Scenarios), all: es.All, minEP: es.MinPrefillEP})
		}
		out[i].keys = append(out[i].keys, es.Key)
	}
	return out
}

// entryObject is a changelog entry as the planner's metadata lists it:
// its fields under their YAML names, flags only when set.
func entryObject(e *ixconfig.ChangelogEntry) matrix.Object {
	o := matrix.Object{
		{Key: "config-keys", Value: anyStrings(e.ConfigKeys)},
		{Key: "description", Value: anyStrings(e.Description)},
		{Key: "pr-link", Value: e.PRLink},
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{e.EvalsOnly, "evals-only"}, {e.AllEvals, "all-evals"}, {e.NoEvals, "no-evals"}, {e.AppendOnly, "append-only"}} {
		if f.on {
			o = append(o, matrix.Field{Key: f.name, Value: true})
		}
	}
	if e.EvalMinPrefillEP > 0 {
		o = append(o, matrix.Field{Key: "eval-min-prefill-ep", Value: int64(e.EvalMinPrefillEP)})
	}
	if len(e.ScenarioTypes) > 0 {
		o = append(o, matrix.Field{Key: "scenario-type", Value: anyStrings(e.ScenarioTypes)})
	}
	return o
}

func anyStrings(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}
