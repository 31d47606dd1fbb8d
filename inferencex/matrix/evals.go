package matrix

import "sort"

// EvalPick is one row InferenceX's eval selection keeps.
type EvalPick struct {
	Index int // index into the rows passed to SelectEvals
	// Conc is the concurrency the eval runs at. Multinode rows carry it as
	// eval-conc (HasEvalConc); a single-node row's conc is a scalar and is
	// the eval concurrency itself.
	Conc        int
	HasEvalConc bool
}

// parallelismExcluded are the keys that do not make two rows different
// deployments (§5.2).
var parallelismExcluded = []string{"conc", "run-eval", "eval-only", "eval-conc", "eval-all-concs", "exp-name"}

// ParallelismKey is the canonical JSON of a row minus conc, eval fields and
// exp-name: rows with equal keys are the same deployment.
func ParallelismKey(r *Row) string {
	return canonical(r.Fields.Without(parallelismExcluded...))
}

func (r *Row) multinode() bool { return r.Entry == nil || r.Entry.Multinode }

func (r *Row) is8k1k() bool { return r.Int("isl") == 8192 && r.Int("osl") == 1024 }

// groupKey is the canonical JSON of the named fields of a row.
func groupKey(r *Row, keys ...string) string {
	o := make(Object, 0, len(keys))
	for _, k := range keys {
		v, _ := r.Fields.Get(k)
		o = append(o, Field{k, v})
	}
	return canonical(o)
}

// SelectEvals applies InferenceX's eval selection as `--evals-only` runs it
// (agentic rows included) over the whole row list.
func SelectEvals(rows []*Row) []EvalPick { return selectEvals(rows, true) }

// selectEvals is InferenceX's mark_eval_entries. Candidates are fixed-seq-len
// rows at 8k1k and, with includeAgentic, agentic rows:
//
//   - Single-node fixed-seq-len: rows with a conc >= 16, grouped by (model,
//     runner, framework, precision, isl, osl, spec-decoding, dp-attn) across
//     every tp/ep. Of the group's distinct concs, the highest and the median
//     (the upper middle for an even count) are chosen, and every row of the
//     group at either conc is selected.
//   - Multinode (both scenarios): per parallelism key, the single row with
//     the highest conc >= 16; it gets eval-conc; the earliest row wins ties.
//   - Single-node agentic: per (model, runner, framework, precision), the
//     single row with the highest conc, with no minimum; earliest wins ties.
//
// Picks come back in row order.
func selectEvals(rows []*Row, includeAgentic bool) []EvalPick {
	chosen := map[int]EvalPick{}

	// Single-node fixed-seq-len.
	type snGroup struct{ idx, conc []int }
	snGroups := map[string]*snGroup{}
	var snOrder []string
	for i, r := range rows {
		if r.multinode() || r.Scenario != FixedSeqLen || !r.is8k1k() {
			continue
		}
		c := r.Int("conc")
		if c < MinEvalConc {
			continue
		}
		k := groupKey(r, "model", "runner", "framework", "precision", "isl", "osl", "spec-decoding", "dp-attn")
		g, ok := snGroups[k]
		if !ok {
			g = &snGroup{}
			snGroups[k] = g
			snOrder = append(snOrder, k)
		}
		g.idx = append(g.idx, i)
		g.conc = append(g.conc, c)
	}
	for _, k := range snOrder {
		g := snGroups[k]
		distinct := append([]int(nil), g.conc...)
		sort.Ints(distinct)
		distinct = compactInts(distinct)
		highest, median := distinct[len(distinct)-1], distinct[len(distinct)/2]
		for j, i := range g.idx {
			if g.conc[j] == highest || g.conc[j] == median {
				chosen[i] = EvalPick{Index: i, Conc: g.conc[j]}
			}
		}
	}

	// Multinode: highest eligible conc per parallelism key.
	type best struct{ pick EvalPick }
	mnGroups := map[string]*best{}
	for i, r := range rows {
		if !r.multinode() {
			continue
		}
		if r.Scenario == FixedSeqLen && !r.is8k1k() {
			continue
		}
		if r.Scenario == AgenticCoding && !includeAgentic {
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
		if g, ok := mnGroups[k]; ok {
			if top > g.pick.Conc {
				g.pick = EvalPick{Index: i, Conc: top, HasEvalConc: true}
			}
			continue
		}
		mnGroups[k] = &best{EvalPick{Index: i, Conc: top, HasEvalConc: true}}
	}
	for _, g := range mnGroups {
		chosen[g.pick.Index] = g.pick
	}

	// Single-node agentic: highest conc per (model, runner, framework, precision).
	if includeAgentic {
		agGroups := map[string]*best{}
		for i, r := range rows {
			if r.multinode() || r.Scenario != AgenticCoding {
				continue
			}
			c := r.Int("conc")
			k := groupKey(r, "model", "runner", "framework", "precision")
			if g, ok := agGroups[k]; ok {
				if c > g.pick.Conc {
					g.pick = EvalPick{Index: i, Conc: c}
				}
				continue
			}
			agGroups[k] = &best{EvalPick{Index: i, Conc: c}}
		}
		for _, g := range agGroups {
			chosen[g.pick.Index] = g.pick
		}
	}

	out := make([]EvalPick, 0, len(chosen))
	for _, p := range chosen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func compactInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// EvalRows is the `--evals-only` output: the selected rows, annotated, in
// their original order. run-eval becomes true (in place when the row has
// it, appended otherwise), multinode rows then get eval-conc (conc is left
// whole), and every row gets eval-only.
func EvalRows(rows []*Row) []*Row {
	picks := SelectEvals(rows)
	out := make([]*Row, 0, len(picks))
	for _, p := range picks {
		out = append(out, evalOnly(rows[p.Index], p))
	}
	return out
}

// AllEvalRows is the --evals-only output under all-evals, InferenceX's
// wider eval selection (mark_all_eval_entries, without its vendor suites):
//
//   - single-node rows: every agentic row and every fixed-seq-len 8k1k row;
//   - multinode agentic rows: merged per parallelism key (conc becomes the
//     sorted union), one eval at the highest conc (eval-conc), no minimum;
//   - multinode fixed-seq-len 8k1k rows: merged per parallelism key, the
//     eval runs at every conc of the merged row (eval-all-concs);
//   - fixed-seq-len rows at other lengths: no eval.
//
// Rows come back in first-appearance order, annotated run-eval (in place
// when the row has it), eval-conc or eval-all-concs, then eval-only.
func AllEvalRows(rows []*Row) []*Row {
	var out []*Row
	merged := map[string]int{} // parallelism key -> index into out
	for _, r := range rows {
		agentic := r.Scenario == AgenticCoding
		if !agentic && !r.is8k1k() {
			continue
		}
		fields := append(Object(nil), r.Fields...)
		fields.Set("run-eval", true)
		if !r.multinode() {
			fields = append(fields, Field{"eval-only", true})
			cp := *r
			cp.Fields = fields
			out = append(out, &cp)
			continue
		}
		key := ParallelismKey(r)
		if i, ok := merged[key]; ok {
			m := out[i]
			concs := unionInts(m.Conc(), r.Conc())
			m.Fields.Set("conc", intsValue(concs))
			if agentic {
				m.Fields.Set("eval-conc", int64(concs[len(concs)-1]))
			}
			continue
		}
		concs := unionInts(nil, r.Conc())
		fields.Set("conc", intsValue(concs))
		if agentic {
			fields = append(fields, Field{"eval-conc", int64(concs[len(concs)-1])})
		} else {
			fields = append(fields, Field{"eval-all-concs", true})
		}
		fields = append(fields, Field{"eval-only", true})
		cp := *r
		cp.Fields = fields
		merged[key] = len(out)
		out = append(out, &cp)
	}
	return out
}

// EvalConcs is the concurrencies an eval row evaluates: every conc under
// eval-all-concs, eval-conc when the row has it, else its (single-node)
// conc.
func EvalConcs(r *Row) []int {
	if v, ok := r.Fields.Get("eval-all-concs"); ok && v == true {
		return r.Conc()
	}
	if _, ok := r.Fields.Get("eval-conc"); ok {
		return []int{r.Int("eval-conc")}
	}
	return r.Conc()
}

func unionInts(a, b []int) []int {
	out := append(append([]int(nil), a...), b...)
	sort.Ints(out)
	return compactInts(out)
}

func intsValue(v []int) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// evalOnly annotates a copy of src as an --evals-only row: run-eval
// becomes true (in place when the row has it, appended otherwise), then
// eval-conc for multinode picks, then eval-only.
func evalOnly(src *Row, p EvalPick) *Row {
	fields := append(Object(nil), src.Fields...)
	fields.Set("run-eval", true)
	if p.HasEvalConc {
		fields = append(fields, Field{"eval-conc", int64(p.Conc)})
	}
	fields = append(fields, Field{"eval-only", true})
	cp := *src
	cp.Fields = fields
	return &cp
}

// MarkEvals is InferenceX's output with neither --no-evals nor --evals-only
// (ix-generator-spec.md §5, informational there, not covered by the
// reference files): the eval rule runs without agentic rows; every row gets
// run-eval (true when chosen; in place for fixed-seq-len rows, appended for
// agentic ones), chosen multinode rows also get eval-conc; nothing is
// dropped.
func MarkEvals(rows []*Row) []*Row {
	chosen := map[int]EvalPick{}
	for _, p := range selectEvals(rows, false) {
		chosen[p.Index] = p
	}
	out := make([]*Row, len(rows))
	for i, r := range rows {
		cp := *r
		cp.Fields = append(Object(nil), r.Fields...)
		p, ok := chosen[i]
		cp.Fields.Set("run-eval", ok)
		if ok && p.HasEvalConc {
			cp.Fields = append(cp.Fields, Field{"eval-conc", int64(p.Conc)})
		}
		out[i] = &cp
	}
	return out
}
