package matrix

import "sort"

// EvalPick is one row InferenceX's eval selection keeps, with its eval-conc.
type EvalPick struct {
	Index int // index into the rows passed to SelectEvals
	Conc  int
}

// parallelismExcluded are the keys that do not make two rows different
// deployments (§5.2).
var parallelismExcluded = []string{"conc", "run-eval", "eval-only", "eval-conc", "eval-all-concs", "exp-name"}

// ParallelismKey is the canonical JSON of a row minus conc, eval fields and
// exp-name: rows with equal keys are the same deployment.
func ParallelismKey(r *Row) string {
	return canonical(r.Fields.Without(parallelismExcluded...))
}

// SelectEvals applies InferenceX's multinode eval rule over the whole row
// list: per parallelism key, the single row with the highest conc >= 16
// (8k1k only for fixed-seq-len rows; earliest row wins ties).
func SelectEvals(rows []*Row) []EvalPick {
	type best struct{ pick EvalPick }
	groups := map[string]*best{}
	var order []string
	for i, r := range rows {
		if r.Scenario == FixedSeqLen && !(r.Int("isl") == 8192 && r.Int("osl") == 1024) {
			continue
		}
		top := -1
		for _, c := range r.Conc() {
			if c >= MinEvalConc && c > top {
				top = c
			}
		}
		if top < 0 {
			continue
		}
		k := ParallelismKey(r)
		if g, ok := groups[k]; ok {
			if top > g.pick.Conc {
				g.pick = EvalPick{Index: i, Conc: top}
			}
			continue
		}
		groups[k] = &best{EvalPick{Index: i, Conc: top}}
		order = append(order, k)
	}
	out := make([]EvalPick, 0, len(groups))
	for _, k := range order {
		out = append(out, groups[k].pick)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// EvalRows is the `--evals-only` output: the selected rows, annotated, in
// their original order. conc is left whole; eval-conc says which to run.
func EvalRows(rows []*Row) []*Row {
	picks := SelectEvals(rows)
	out := make([]*Row, 0, len(picks))
	for _, p := range picks {
		src := rows[p.Index]
		fields := append(Object(nil), src.Fields...)
		if src.Scenario == FixedSeqLen {
			fields.Set("run-eval", true) // keeps its position
		} else {
			fields = append(fields, Field{"run-eval", true})
		}
		fields = append(fields, Field{"eval-conc", int64(p.Conc)}, Field{"eval-only", true})
		cp := *src
		cp.Fields = fields
		out = append(out, &cp)
	}
	return out
}

// MarkEvals is InferenceX's output with neither --no-evals nor --evals-only
// (ix-generator-spec.md §5, informational there, not covered by the
// reference files): fixed-seq-len rows chosen by the eval rule get
// run-eval true plus eval-conc; agentic rows are never chosen and get a
// trailing run-eval false; nothing is dropped.
func MarkEvals(rows []*Row) []*Row {
	var fixed []*Row
	var fixedIdx []int
	for i, r := range rows {
		if r.Scenario == FixedSeqLen {
			fixed = append(fixed, r)
			fixedIdx = append(fixedIdx, i)
		}
	}
	chosen := map[int]int{}
	for _, p := range SelectEvals(fixed) {
		chosen[fixedIdx[p.Index]] = p.Conc
	}
	out := make([]*Row, len(rows))
	for i, r := range rows {
		cp := *r
		cp.Fields = append(Object(nil), r.Fields...)
		if r.Scenario == AgenticCoding {
			cp.Fields = append(cp.Fields, Field{"run-eval", false})
		} else if c, ok := chosen[i]; ok {
			cp.Fields.Set("run-eval", true)
			cp.Fields = append(cp.Fields, Field{"eval-conc", int64(c)})
		}
		out[i] = &cp
	}
	return out
}
