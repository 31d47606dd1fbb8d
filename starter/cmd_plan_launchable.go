package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/plan"
)

// launchKey is what `starter plan --launchable` finds for one config key.
type launchKey struct {
	Key    string `json:"config-key"`
	Runner string `json:"runner"`
	Served bool   `json:"served"`
	// Plans: the key plans on the cluster (plan.Build); Points is how many.
	Plans  bool `json:"plans"`
	Points int  `json:"points"`
	// Recipes counts the key's distinct CONFIG_FILE refs, Found those whose
	// file is under the recipes root, Rendered those srtlaunch.Render accepts.
	Recipes  int      `json:"recipes"`
	Found    int      `json:"recipes-found"`
	Rendered int      `json:"recipes-rendered"`
	Missing  []string `json:"missing-recipes,omitempty"`
	// Renders: srtlaunch.Render accepts every recipe found (false when none
	// was found).
	Renders bool `json:"renders"`
	// UnknownModels are recipe model.path aliases the profile's models do
	// not list: the backend cannot mount a checkpoint for them.
	UnknownModels []string `json:"unknown-models,omitempty"`
	Launchable    bool     `json:"launchable"`
	Reason        string   `json:"reason,omitempty"`
}

type launchReport struct {
	Cluster     string      `json:"cluster"`
	RecipesRoot string      `json:"recipes-root"`
	Keys        []launchKey `json:"keys"`
	Listed      int         `json:"listed"`
	Launchable  int         `json:"launchable"`
	// NotServed are keys a glob matched whose runner the profile does not
	// serve; they are counted here, not listed (a key named exactly is
	// listed with that reason).
	NotServed []string `json:"not-served"`
}

// planLaunchable checks, per config key, everything a launch on the cluster
// needs short of GPUs: the key plans, its recipes are under the recipes
// root, and each recipe renders to a process set.
func planLaunchable(out io.Writer, f *planFlags) error {
	if f.format == "ix-json" || f.changelog.Path != "" || f.evalsOnly || f.noEvals ||
		len(f.concs)+len(f.seqLens)+len(f.scenarioTypes) > 0 || f.nodeFilter != "" {
		return usageError("--launchable checks whole config keys: drop --format ix-json, --changelog, --no-evals, --evals-only, --conc, --seq-lens, --scenario-type and --runner-node-filter")
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
	root, err := launchRecipesRoot(f.recipesRoot, s, c)
	if err != nil {
		return err
	}
	keys, err := matrix.ResolveKeys(master, s.ConfigKeys)
	if err != nil {
		return configError(err)
	}
	exact := map[string]bool{}
	for _, p := range s.ConfigKeys {
		if !strings.ContainsAny(p, "*?") {
			exact[p] = true
		}
	}
	rep := launchReport{Cluster: c.Name, RecipesRoot: root, NotServed: []string{}}
	for _, key := range keys {
		e := master.Entry(key)
		if !c.ServesRunner(e.Runner) {
			if !exact[key] {
				rep.NotServed = append(rep.NotServed, key)
				continue
			}
			rep.Keys = append(rep.Keys, launchKey{Key: key, Runner: e.Runner,
				Reason: fmt.Sprintf("runner %s is not served by %s (it serves %s)", e.Runner, c.Name, strings.Join(c.Runners, ", "))})
			continue
		}
		rep.Keys = append(rep.Keys, checkLaunch(key, e, master, runners, s, c, root, f.launcherVersion))
	}
	rep.Listed = len(rep.Keys)
	for _, k := range rep.Keys {
		if k.Launchable {
			rep.Launchable++
		}
	}
	if f.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeLaunchable(out, rep)
}

// launchRecipesRoot is the directory CONFIG_FILE refs resolve against; it
// must exist, or every key would fail for the same reason.
func launchRecipesRoot(flagRoot string, s *config.Sweep, c *config.Cluster) (string, error) {
	root, from := flagRoot, "--recipes-root"
	switch {
	case root != "":
	case s.RecipesRoot != "":
		root, from = s.RecipesRoot, strictyaml.DisplayPath(s.Path)+": recipes-root"
	case c.RecipesRoot != "":
		root, from = c.RecipesRoot, strictyaml.DisplayPath(c.Path)+": recipes-root"
	default:
		return "", usageError("no recipes root: give --recipes-root DIR (an srt-slurm checkout) or set recipes-root in the cluster profile")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", &exitError{code: 1, msg: fmt.Sprintf("%s: recipes root %s is not a directory on this machine; give --recipes-root DIR (an srt-slurm checkout)", from, root)}
	}
	return abs, nil
}

// checkLaunch plans one served key, looks for its recipes and renders each
// one on a placeholder allocation of its footprint.
func checkLaunch(key string, e *ixconfig.Entry, master *ixconfig.Master, runners *ixconfig.Runners, s *config.Sweep,
	c *config.Cluster, root, launcher string) launchKey {
	k := launchKey{Key: key, Runner: e.Runner, Served: true}
	var planErr, refErr, renderErr error

	sweep := *s
	sweep.ConfigKeys = []string{key}
	// The golden AL each recipe's perf run injects (0: eval render only),
	// from the rows, or from the plan when it has one.
	al := map[string]float64{}
	var refs []string
	p, err := plan.Build(plan.Options{Sweep: &sweep, Cluster: c, RecipesRoot: root, LauncherVersion: launcher})
	if err != nil {
		planErr = err
	} else {
		k.Plans, k.Points = true, len(p.Points)
	}
	rows, err := matrix.Generate(master, runners, matrix.Options{Keys: []string{key}})
	if err != nil && planErr == nil {
		planErr = err
	}
	for _, row := range rows {
		ref, err := plan.RecipeRef(row)
		if err != nil {
			refErr = cmp.Or(refErr, err)
			continue
		}
		ref = strings.TrimSpace(ref)
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
		if data, err := row.MarshalJSON(); err == nil {
			if v, ok := plan.RowSyntheticAL(data); ok {
				al[ref] = max(al[ref], v)
			}
		}
	}
	if p != nil {
		for _, pt := range p.Points {
			if pt.Recipe != nil && pt.SyntheticAL > 0 {
				al[pt.Recipe.Ref] = max(al[pt.Recipe.Ref], pt.SyntheticAL)
			}
		}
	}
	k.Recipes = len(refs)
	for _, ref := range refs {
		file, _ := config.SplitRecipeRef(ref)
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			if !slices.Contains(k.Missing, file) { // variants of one file
				k.Missing = append(k.Missing, file)
			}
			continue
		}
		k.Found++
		alias, err := renderLaunch(root, ref, c, al[ref])
		if alias != "" && !slices.Contains(k.UnknownModels, alias) {
			k.UnknownModels = append(k.UnknownModels, alias)
		}
		if err != nil {
			renderErr = cmp.Or(renderErr, err)
			continue
		}
		k.Rendered++
	}
	k.Renders = k.Found > 0 && k.Rendered == k.Found
	k.Launchable = k.Plans && k.Renders && k.Found == k.Recipes && len(k.UnknownModels) == 0
	switch {
	case len(k.Missing) > 0:
		k.Reason = fmt.Sprintf("recipe %s not found", k.Missing[0])
		if n := len(k.Missing) - 1; n > 0 {
			k.Reason += fmt.Sprintf(" (and %d more)", n)
		}
	case planErr != nil:
		k.Reason = oneLine(planErr)
	case refErr != nil:
		k.Reason = oneLine(refErr)
	case renderErr != nil:
		k.Reason = oneLine(renderErr)
		if n := k.Found - k.Rendered - 1; n > 0 {
			verb := "does"
			if n > 1 {
				verb = "do"
			}
			k.Reason += fmt.Sprintf(" (%d more recipe%s %s not render)", n, plural(n), verb)
		}
	case len(k.UnknownModels) > 0:
		quoted, verb := make([]string, len(k.UnknownModels)), "is"
		for i, m := range k.UnknownModels {
			quoted[i] = strconv.Quote(m)
		}
		if len(quoted) > 1 {
			verb = "are"
		}
		k.Reason = fmt.Sprintf("model.path %s %s not in cluster profile %s's models", strings.Join(quoted, ", "), verb, c.Name)
	case !k.Launchable:
		k.Reason = "no recipe to launch"
	}
	// Recipe paths read as the CONFIG_FILE refs do.
	k.Reason = strings.ReplaceAll(k.Reason, root+string(filepath.Separator), "")
	return k
}

// renderLaunch renders a recipe on placeholder nodes and paths, as the
// Slurm backend would render it on real ones: the eval render and, with a
// golden AL, the perf render. alias is the recipe's model alias when the
// profile does not list it (the render then names the checkpoint as
// `starter engine render` does without a profile).
func renderLaunch(root, ref string, c *config.Cluster, al float64) (alias string, err error) {
	r, err := config.LoadRecipe(root, ref)
	if err != nil {
		return "", err
	}
	model := resolveModelDir(r, c)
	name := filepath.Base(model)
	if model == "" {
		if !strings.HasPrefix(r.Model.Path, "hf:") {
			alias = r.Model.Path
		}
		name = fallbackModelName(r)
	}
	return alias, srtlaunch.Preflight(r, c.GPUsPerNode, name, al)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func writeLaunchable(out io.Writer, rep launchReport) error {
	fmt.Fprintf(out, "launch check on %s, recipes under %s\n\n", rep.Cluster, strictyaml.DisplayPath(rep.RecipesRoot))
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIG-KEY\tPLANS\tRECIPES\tRENDERS\tREASON")
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, k := range rep.Keys {
		recipes, renders := "-", "-"
		if k.Served {
			recipes = fmt.Sprintf("%d/%d", k.Found, k.Recipes)
			if k.Found > 0 {
				renders = yesNo[k.Renders]
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Key, yesNo[k.Plans], recipes, renders, k.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A launchable key has no reason: no padding after its last column.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			fmt.Fprintln(out, strings.TrimRight(line, " \n"))
		}
	}
	fmt.Fprintln(out)
	if n := len(rep.NotServed); n > 0 {
		fmt.Fprintf(out, "not listed: %d key%s on runners %s does not serve\n", n, plural(n), rep.Cluster)
	}
	_, err := fmt.Fprintf(out, "%d of %d keys launchable on %s\n", rep.Launchable, rep.Listed, rep.Cluster)
	return err
}
