package export

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/point"
)

// markAdded marks an agg_bmk row of a point an adaptive search added:
// "append_only": true (InferenceX publishes such points with an
// append-only changelog entry, AppendOnlyFile) and "adaptive", what added
// it (point.Added: mode, deployment, reason, the gap or SLO it served).
func markAdded(row map[string]any, a *point.Added) {
	row["append_only"] = true
	row["adaptive"] = a
}

type addedRow struct {
	id   identity
	conc int
}

// appendOnlyEntries is the perf-changelog entries that publish the added
// points as InferenceX appends points to a curve: one entry per config
// key, append-only: true, naming the concurrencies added per topology. The
// master config gets them appended to the conc-list of the search entry of
// their deployment (`starter check --added` checks that). pr-link is XXX,
// which InferenceX allows until the PR is opened.
func appendOnlyEntries(sweepID string, rows []addedRow) []byte {
	if len(rows) == 0 {
		return nil
	}
	type key struct {
		name, scenario string
		byTopo         map[string][]int
		topos, modes   []string
	}
	var keys []*key
	for _, r := range rows {
		name, _ := r.id.fields["config_key"].(string)
		i := slices.IndexFunc(keys, func(k *key) bool { return k.name == name })
		if i < 0 {
			scenario := "fixed-seq-len"
			if r.id.agentic {
				scenario = "agentic-coding"
			}
			keys = append(keys, &key{name: name, scenario: scenario, byTopo: map[string][]int{}})
			i = len(keys) - 1
		}
		k := keys[i]
		topo, _ := r.id.fields["topology"].(string)
		if !slices.Contains(k.topos, topo) {
			k.topos = append(k.topos, topo)
		}
		if !slices.Contains(k.byTopo[topo], r.conc) {
			k.byTopo[topo] = append(k.byTopo[topo], r.conc)
		}
		if !slices.Contains(k.modes, r.id.added.Mode) {
			k.modes = append(k.modes, r.id.added.Mode)
		}
	}
	slices.SortFunc(keys, func(a, b *key) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Append these entries to InferenceX's perf-changelog.yaml, and each\n# concurrency to the conc-list of its deployment's search-space entry.\n")
	for _, k := range keys {
		slices.Sort(k.topos)
		var parts []string
		for _, t := range k.topos {
			cs := k.byTopo[t]
			slices.Sort(cs)
			var s []string
			for _, c := range cs {
				s = append(s, fmt.Sprint(c))
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(s, ", "), t))
		}
		slices.Sort(k.modes)
		desc := fmt.Sprintf("Append concurrency %s points to the existing %s curve (sweepflow adaptive %s, sweep %s).",
			strings.Join(parts, "; "), k.name, strings.Join(k.modes, " and "), sweepID)
		fmt.Fprintf(&b, "\n- config-keys:\n    - %s\n  scenario-type:\n    - %s\n  description:\n    - %q\n  pr-link: XXX\n  append-only: true\n",
			k.name, k.scenario, desc)
	}
	return b.Bytes()
}
