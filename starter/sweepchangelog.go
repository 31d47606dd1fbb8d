package main

import (
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/changelog"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/plan"
)

// changelogRef names the perf-changelog entries a sweep runs.
type changelogRef struct {
	Path         string
	Entry, Since int
}

// applyChangelog resolves the chosen entries against the sweep's master
// config and turns the sweep into theirs: their throughput keys become its
// config keys, their scenario types and eval selection filter the plan.
// The sweep file still names the config files, runners, cluster, recipes
// and golden AL.
func applyChangelog(ref changelogRef, sw *config.Sweep, opts *plan.Options) (*changelog.Selection, error) {
	cl, err := ixconfig.LoadChangelog(ref.Path)
	if err != nil {
		return nil, err
	}
	entries, err := changelog.Select(cl, ref.Entry, ref.Since)
	if err != nil {
		return nil, err
	}
	master, err := ixconfig.LoadMaster(sw.ConfigFiles...)
	if err != nil {
		return nil, err
	}
	sel, err := changelog.Resolve(entries, master)
	if err != nil {
		return nil, err
	}
	if err := sel.RunnableAsSweep(); err != nil {
		return nil, err
	}
	sw.ConfigKeys = sel.Keys()
	sw.Evals = sw.Evals && sel.HasEvals()
	opts.KeepRow, opts.KeepEval, opts.EvalOnlyRow = sel.KeepRow, sel.KeepEval, sel.EvalOnlyRow
	return sel, nil
}

// changelogMemo records in the sweep's memo which entries it runs.
func changelogMemo(ref changelogRef) map[string]any {
	m := map[string]any{"file": absPath(ref.Path)}
	cl, err := ixconfig.LoadChangelog(ref.Path)
	if err != nil {
		return m
	}
	if entries, err := changelog.Select(cl, ref.Entry, ref.Since); err == nil {
		sel := &changelog.Selection{Entries: entries}
		m["entries"] = sel.Describe()
	}
	return m
}
