// Package changelog turns entries of an InferenceX perf-changelog.yaml into
// what a sweep runs, the way InferenceX's PR flow does: the entries a change
// adds (or the ones an operator names) select config keys (with * globs),
// their scenario types, and whether throughput rows, eval rows or both are
// generated for them.
package changelog

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// Scenarios is every scenario type, in InferenceX's canonical order.
var Scenarios = []string{ixconfig.ScenarioFixedSeqLen, ixconfig.ScenarioAgenticCoding}

// Select picks entries by their 1-based position: entry N alone, or every
// entry from N to the end (since). A negative N counts from the end (-1 is
// the last entry). With neither, the last entry is chosen.
func Select(cl *ixconfig.Changelog, entry, since int) ([]*ixconfig.ChangelogEntry, error) {
	n := len(cl.Entries)
	norm := func(flag string, v int) (int, error) {
		i := v
		if v < 0 {
			i = n + 1 + v
		}
		if i < 1 || i > n {
			return 0, fmt.Errorf("%s %d: %s has entries 1..%d", flag, v, cl.Path, n)
		}
		return i, nil
	}
	switch {
	case entry != 0 && since != 0:
		return nil, fmt.Errorf("--entry and --since are mutually exclusive")
	case entry != 0:
		i, err := norm("--entry", entry)
		if err != nil {
			return nil, err
		}
		return cl.Entries[i-1 : i], nil
	case since != 0:
		i, err := norm("--since", since)
		if err != nil {
			return nil, err
		}
		return cl.Entries[i-1:], nil
	}
	return cl.Entries[n-1:], nil
}

// Added checks the changelog's own append-only promise against its base
// copy and returns the entries head adds. As InferenceX's setup does, only
// lines that are blank may disappear; any other base line must still be
// there, in order, at the start of head.
func Added(base, head *ixconfig.Changelog) ([]*ixconfig.ChangelogEntry, error) {
	bl, hl := nonBlankLines(base.Raw), nonBlankLines(head.Raw)
	for i, b := range bl {
		if i >= len(hl) || hl[i].text != b.text {
			line := b.line
			where := fmt.Sprintf("%s:%d", base.Path, line)
			if i < len(hl) {
				where = fmt.Sprintf("%s:%d", head.Path, hl[i].line)
			}
			return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: head.Path, Line: lineOr(hl, i)}, Field: "append-only",
				Msg: fmt.Sprintf("base line %d %q was deleted or changed (at %s); a changelog only grows at its end", line, b.text, where)}
		}
	}
	if len(head.Entries) < len(base.Entries) {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: head.Path}, Field: "append-only", Msg: "head has fewer entries than its base"}
	}
	added := head.Entries[len(base.Entries):]
	if len(added) == 0 {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: head.Path}, Msg: fmt.Sprintf("no entries added relative to %s", base.Path)}
	}
	return added, nil
}

type numbered struct {
	line int
	text string
}

func nonBlankLines(data []byte) []numbered {
	var out []numbered
	for i, l := range bytes.Split(data, []byte{'\n'}) {
		if s := strings.TrimRight(string(l), " "); strings.TrimSpace(s) != "" {
			out = append(out, numbered{line: i + 1, text: s})
		}
	}
	return out
}

func lineOr(ls []numbered, i int) int {
	if i < len(ls) {
		return ls[i].line
	}
	if len(ls) > 0 {
		return ls[len(ls)-1].line
	}
	return 1
}

// KeyScenarios is one config key with the scenario types selected for it.
type KeyScenarios struct {
	Key       string
	Scenarios []string
}

// EvalSelection is a key whose eval rows are generated.
type EvalSelection struct {
	KeyScenarios
	// All is all-evals: every eval candidate, not InferenceX's subset.
	All bool
	// MinPrefillEP drops multinode eval rows with a lower prefill EP.
	MinPrefillEP int
	Entry        *ixconfig.ChangelogEntry
}

// Selection is what the chosen entries run.
type Selection struct {
	Entries []*ixconfig.ChangelogEntry
	// Throughput keys (--no-evals rows) and eval keys (--evals-only rows),
	// each key with the scenarios claimed for it, in entry order.
	Throughput []KeyScenarios
	Evals      []EvalSelection
	AppendOnly bool
	// EvalOnly lists the entries that suppress throughput (evals-only or
	// all-evals); their keys run eval-only points unless another entry
	// claims them for throughput.
	EvalOnly []*ixconfig.ChangelogEntry
}

// Resolve applies InferenceX's selection to entries: every entry's keys
// are resolved against the master config (a * matches any text, every
// other character itself; a pattern must match, a plain key must exist);
// all-evals entries go first so their wider eval selection wins; each
// (key, scenario) is claimed once for throughput and once for evals;
// evals-only and all-evals entries add no throughput; no-evals and
// append-only entries add no evals. Append-only entries cannot share a
// selection with regular ones.
func Resolve(entries []*ixconfig.ChangelogEntry, master *ixconfig.Master) (*Selection, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("no changelog entries selected")
	}
	sel := &Selection{Entries: entries}
	var errs strictyaml.Errors
	type resolved struct {
		e    *ixconfig.ChangelogEntry
		keys []string
	}
	var rs []resolved
	appendOnly := 0
	for _, e := range entries {
		errs = append(errs, e.Problems...)
		keys, err := ResolveKeys(e, master)
		if err != nil {
			errs = append(errs, err.(strictyaml.Errors)...)
		}
		rs = append(rs, resolved{e, keys})
		if e.AppendOnly {
			appendOnly++
		}
	}
	if appendOnly > 0 && appendOnly < len(entries) {
		for _, e := range entries {
			if e.AppendOnly {
				errs = append(errs, &strictyaml.Error{Pos: e.FieldPos("append-only"), Field: fmt.Sprintf("entry %d.append-only", e.Index),
					Msg: "append-only entries cannot share a sweep with regular entries; select them alone"})
				break
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	sel.AppendOnly = appendOnly > 0
	slices.SortStableFunc(rs, func(a, b resolved) int {
		switch {
		case a.e.AllEvals == b.e.AllEvals:
			return 0
		case a.e.AllEvals:
			return -1
		}
		return 1
	})
	tput, evals := claims{}, claims{}
	for _, r := range rs {
		scen := r.e.ScenarioTypes
		if len(scen) == 0 {
			scen = Scenarios
		}
		if r.e.EvalsOnly || r.e.AllEvals {
			sel.EvalOnly = append(sel.EvalOnly, r.e)
		} else {
			sel.Throughput = append(sel.Throughput, tput.claim(r.keys, scen)...)
		}
		if r.e.AppendOnly || r.e.NoEvals {
			continue
		}
		for _, ks := range evals.claim(r.keys, scen) {
			sel.Evals = append(sel.Evals, EvalSelection{KeyScenarios: ks, All: r.e.AllEvals, MinPrefillEP: r.e.EvalMinPrefillEP, Entry: r.e})
		}
	}
	return sel, nil
}

// claims records which (key, scenario) pairs are taken.
type claims map[string][]string

func (c claims) claim(keys, scenarios []string) []KeyScenarios {
	var out []KeyScenarios
	for _, k := range keys {
		var fresh []string
		for _, s := range Scenarios { // canonical order
			if slices.Contains(scenarios, s) && !slices.Contains(c[k], s) {
				fresh = append(fresh, s)
			}
		}
		if len(fresh) > 0 {
			c[k] = append(c[k], fresh...)
			out = append(out, KeyScenarios{Key: k, Scenarios: fresh})
		}
	}
	return out
}

// ResolveKeys resolves one entry's config keys against the master config in
// InferenceX's way: only * is a wildcard (matching any text, the whole key
// must match), matches come in master-config order, repeats are dropped.
// Errors name the key's file:line.
func ResolveKeys(e *ixconfig.ChangelogEntry, master *ixconfig.Master) ([]string, error) {
	var errs strictyaml.Errors
	var out []string
	add := func(k string) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for i, k := range e.ConfigKeys {
		pos := e.Pos
		if i < len(e.KeyPos) {
			pos = e.KeyPos[i]
		}
		field := fmt.Sprintf("entry %d.config-keys[%d]", e.Index, i)
		if strings.Contains(k, "*") {
			re := regexp.MustCompile("^(?s:" + strings.ReplaceAll(regexp.QuoteMeta(k), `\*`, ".*") + ")$")
			n := 0
			for _, mk := range master.Keys() {
				if re.MatchString(mk) {
					add(mk)
					n++
				}
			}
			if n == 0 {
				errs = append(errs, &strictyaml.Error{Pos: pos, Field: field,
					Msg: fmt.Sprintf("no config key matches the pattern %q in %s", k, strings.Join(master.Files, ", "))})
			}
			continue
		}
		if master.Entry(k) == nil {
			errs = append(errs, &strictyaml.Error{Pos: pos, Field: field,
				Msg: fmt.Sprintf("config key %q not found in %s", k, strings.Join(master.Files, ", "))})
			continue
		}
		add(k)
	}
	return out, errs.Err()
}

// Keys is what a sweep's config-keys become: the throughput keys in order,
// then the keys that only have eval-only rows.
func (s *Selection) Keys() []string {
	out := make([]string, 0, len(s.Throughput)+len(s.Evals))
	for _, ks := range s.Throughput {
		out = append(out, ks.Key)
	}
	for _, es := range s.Evals {
		if !slices.Contains(out, es.Key) {
			out = append(out, es.Key)
		}
	}
	return out
}

// KeepRow reports whether a throughput row is selected: its key with its
// scenario.
func (s *Selection) KeepRow(r *matrix.Row) bool {
	for _, ks := range s.Throughput {
		if ks.Key == r.ConfigKey && slices.Contains(ks.Scenarios, r.Scenario) {
			return true
		}
	}
	return false
}

// KeepEval reports whether an eval picked on row is selected: its key and
// scenario have evals, and its prefill EP reaches the entry's minimum.
func (s *Selection) KeepEval(r *matrix.Row) bool {
	for _, es := range s.Evals {
		if es.Key != r.ConfigKey || !slices.Contains(es.Scenarios, r.Scenario) {
			continue
		}
		if es.MinPrefillEP > 0 && r.Search != nil && r.Search.Prefill != nil && r.Search.Prefill.EP < es.MinPrefillEP {
			return false
		}
		return true
	}
	return false
}

// EvalOnlyRow reports whether a generated row runs as an eval-only point,
// the way InferenceX runs an evals-only or all-evals entry's eval rows
// (EVAL_ONLY: the server comes up, the eval runs, no throughput benchmark):
// its key and scenario have evals selected but no throughput row claims
// them. all is all-evals: InferenceX's wider selection
// (matrix.AllEvalRows) rather than its default one. Rows below the entry's eval-min-prefill-ep are not selected.
func (s *Selection) EvalOnlyRow(r *matrix.Row) (ok, all bool) {
	if s.KeepRow(r) {
		return false, false
	}
	for _, es := range s.Evals {
		if es.Key != r.ConfigKey || !slices.Contains(es.Scenarios, r.Scenario) {
			continue
		}
		if es.MinPrefillEP > 0 && r.Search != nil && r.Search.Prefill != nil && r.Search.Prefill.EP < es.MinPrefillEP {
			return false, false
		}
		return true, es.All
	}
	return false, false
}

// RunnableAsSweep says why the selection cannot become a sweep, or nil: it
// must select throughput rows or eval rows. Keys of evals-only and
// all-evals entries that no other entry claims for throughput become
// eval-only points (EvalOnlyRow).
func (s *Selection) RunnableAsSweep() error {
	if len(s.Throughput) == 0 && len(s.Evals) == 0 {
		return fmt.Errorf("the selected changelog entries select neither throughput nor eval rows")
	}
	return nil
}

// HasEvals reports whether any key has evals selected.
func (s *Selection) HasEvals() bool { return len(s.Evals) > 0 }

// Describe is one line per chosen entry: index, line, PR link and keys.
func (s *Selection) Describe() []string {
	var out []string
	for _, e := range s.Entries {
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{e.EvalsOnly, "evals-only"}, {e.AllEvals, "all-evals"}, {e.NoEvals, "no-evals"}, {e.AppendOnly, "append-only"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		if len(e.ScenarioTypes) > 0 {
			flags = append(flags, "scenario-type "+strings.Join(e.ScenarioTypes, ","))
		}
		line := fmt.Sprintf("entry %d (%s) %s: %s", e.Index, e.Pos, e.PRLink, strings.Join(e.ConfigKeys, " "))
		if len(flags) > 0 {
			line += " [" + strings.Join(flags, "; ") + "]"
		}
		out = append(out, line)
	}
	return out
}
