package main

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/plan/launchcheck"
)

// planLaunchable checks, per config key, everything a launch on the cluster
// needs short of GPUs (launchcheck).
func planLaunchable(out io.Writer, f *planFlags) error {
	if f.format == "ix-json" || f.changelog.Path != "" || f.evalsOnly || f.noEvals ||
		len(f.concs)+len(f.seqLens)+len(f.scenarioTypes) > 0 || f.nodeFilter != "" || f.onePointPerKey {
		return usageError("--launchable checks whole config keys: drop --format ix-json, --changelog, --no-evals, --evals-only, --conc, --seq-lens, --scenario-type, --runner-node-filter and --one-point-per-key")
	}
	s, err := sweepFromFlags(f)
	if err != nil {
		return err
	}
	if s.ClusterPath == "" {
		return usageError("--launchable needs a cluster profile: give --cluster FILE or set cluster in the sweep file")
	}
	c, err := config.LoadCluster(s.ClusterPath)
	if err != nil {
		return configError(err)
	}
	var errs strictyaml.Errors
	master, err := ixconfig.LoadMaster(s.ConfigFiles...)
	appendErr(&errs, err)
	var runners *ixconfig.Runners
	if s.RunnerConfig != "" {
		runners, err = ixconfig.LoadRunners(s.RunnerConfig)
		appendErr(&errs, err)
	}
	if len(errs) > 0 {
		return configError(errs)
	}
	root, err := f.recipes.resolve()
	if err != nil {
		return err
	}
	root, err = launchcheck.RecipesRoot(root, s, c)
	if errors.Is(err, launchcheck.ErrNoRecipesRoot) {
		return usageError("no recipes root: give --inferencex DIR --srt-slurm DIR (your checkouts), --recipes-root DIR (a tree composed by hand), or set them in the cluster profile")
	}
	if err != nil {
		return err
	}
	rep, err := launchcheck.Check(s, c, master, runners, root, f.launcherVersion)
	if err != nil {
		return configError(err)
	}
	if f.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return launchcheck.Write(out, rep)
}
