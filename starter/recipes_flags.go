package main

import (
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/overlay"
)

// recipeSets are --set dotted.key=value overrides of recipe fields, as
// srtctl applies them: to the picked variant, in order, the value read as
// YAML. The plan's identities hash their effect and every point carries
// them, so a worker launches the recipe the plan hashed.
type recipeSets []string

func (s *recipeSets) bind(fs *flag.FlagSet, what string) {
	fs.StringArrayVar((*[]string)(s), "set", nil, "override a field of "+what+" as srtctl --set does: dotted.key=value, the value read as YAML (repeatable; later wins)")
}

// check refuses a malformed --set before anything is read.
func (s recipeSets) check() error {
	for _, v := range s {
		if _, _, err := config.ParseSet(v); err != nil {
			return usageError("%v", err)
		}
	}
	return nil
}

// recipesFlags say where CONFIG_FILE paths resolve: a recipes root as it
// is (--recipes-root), an srt-slurm checkout (--srt-slurm), or the root
// composed from the user's InferenceX and srt-slurm checkouts as
// InferenceX's launchers lay it (--inferencex [--srt-slurm]).
type recipesFlags struct{ root, inferencex, srtSlurm string }

func (r *recipesFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&r.root, "recipes-root", "", "directory CONFIG_FILE=recipes/... paths resolve against; overrides sweep and cluster")
	r.bindCheckouts(fs)
}

func (r *recipesFlags) bindCheckouts(fs *flag.FlagSet) {
	fs.StringVar(&r.inferencex, "inferencex", "", "InferenceX checkout: the recipes root is its recipes laid over --srt-slurm as its GB200/GB300 launchers lay them (alone for a checkout pinning srt-slurm at utils/srt-slurm)")
	fs.StringVar(&r.srtSlurm, "srt-slurm", "", "srt-slurm checkout: the recipes root (with --inferencex: what InferenceX's recipes are laid over)")
}

// compose is the root composed from the checkouts; nil without
// --inferencex.
func (r recipesFlags) compose() (*overlay.Root, error) {
	if r.inferencex == "" {
		return nil, nil
	}
	cache, err := overlay.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	o, err := overlay.Compose(r.inferencex, r.srtSlurm, cache)
	if err != nil {
		return nil, configError(err)
	}
	return o, nil
}

// resolve is the recipes root the flags give; "" leaves it to the sweep
// file and the cluster profile.
func (r recipesFlags) resolve() (string, error) {
	if r.root != "" && (r.inferencex != "" || r.srtSlurm != "") {
		return "", usageError("--recipes-root names a tree composed by hand; --inferencex and --srt-slurm compose one: give one or the other")
	}
	o, err := r.compose()
	switch {
	case err != nil:
		return "", err
	case o != nil:
		return o.Dir, nil
	case r.srtSlurm != "":
		return r.srtSlurm, nil
	}
	return r.root, nil
}

// checkRoot is resolve for `starter check`, where --inferencex alone also
// names MODELS.md and the golden AL tables: it composes a root only with
// --srt-slurm, or from a checkout that pins srt-slurm itself.
func (r recipesFlags) checkRoot() (string, error) {
	if r.inferencex != "" && r.srtSlurm == "" {
		if l, err := overlay.Detect(r.inferencex); err != nil || l != overlay.PinnedTree {
			return r.root, nil
		}
	}
	return r.resolve()
}
