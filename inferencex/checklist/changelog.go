package checklist

import (
	"errors"
	"fmt"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/changelog"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// RuleChangelog: the chosen perf-changelog entries are well formed, their
// keys resolve, and the changelog only grew relative to its base.
const RuleChangelog = "changelog"

// changelogStep reads opts.Changelog, picks its entries (--entry/--since,
// else the entries added relative to the base copy, else the last one) and
// returns their findings, notes and resolved config keys (throughput and
// eval keys both).
func changelogStep(opts Options, master *ixconfig.Master) (findings []Finding, notes []string, keys []string, err error) {
	cl, err := ixconfig.LoadChangelog(opts.Changelog)
	if err != nil {
		return nil, nil, nil, err
	}
	var entries []*ixconfig.ChangelogEntry
	if opts.Base != "" && opts.ChangelogEntry == 0 && opts.ChangelogSince == 0 {
		b := resolveBase(opts.Base, opts.Changelog)
		if exists(b) {
			base, err := ixconfig.LoadChangelog(b)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("changelog base: %w", err)
			}
			if entries, err = changelog.Added(base, cl); err != nil {
				return append(findings, errFindings(err)...), notes, nil, nil
			}
		} else {
			notes = append(notes, fmt.Sprintf("changelog: no base copy of %s in %s; checked its last entry", cl.Path, strictyaml.DisplayPath(opts.Base)))
		}
	}
	if entries == nil {
		if entries, err = changelog.Select(cl, opts.ChangelogEntry, opts.ChangelogSince); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, e := range entries { // Resolve reports the entries' problems
		if e.AppendOnly && opts.Base == "" {
			notes = append(notes, fmt.Sprintf("changelog: entry %d (%s) promises append-only; give --base REF-DIR to check that it adds points only", e.Index, e.Pos))
		}
	}
	sel, err := changelog.Resolve(entries, master)
	if err != nil {
		return append(findings, errFindings(err)...), notes, nil, nil
	}
	for _, ks := range sel.Throughput {
		keys = appendNew(keys, ks.Key)
	}
	for _, es := range sel.Evals {
		keys = appendNew(keys, es.Key)
	}
	return findings, notes, keys, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// errFindings turns loader errors (file:line: field: message) into
// changelog findings.
func errFindings(err error) []Finding {
	if err == nil {
		return nil
	}
	var list strictyaml.Errors
	var one *strictyaml.Error
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = strictyaml.Errors{one}
	default:
		list = strictyaml.Errors{{Msg: err.Error()}}
	}
	out := make([]Finding, 0, len(list))
	for _, e := range list {
		out = append(out, Finding{Rule: RuleChangelog, Pos: e.Pos, Field: e.Field, Got: e.Msg})
	}
	return out
}
