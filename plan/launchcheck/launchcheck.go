// Package launchcheck checks, per InferenceX config key, everything a
// launch on a cluster needs short of GPUs: the key plans, its recipes are
// under the recipes root, each renders to a process set, and the cluster
// profile knows its models (`starter plan --launchable`).
package launchcheck

import (
	"bytes"
	"cmp"
	"errors"
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
	"github.com/sweepflow/sweepflow/inferencex/overlay"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan"
)

// Key is what `starter plan --launchable` finds for one config key.
type Key struct {
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

// Report is the launch check of a sweep's keys on one cluster.
type Report struct {
	Cluster     string `json:"cluster"`
	RecipesRoot string `json:"recipes-root"`
	// Composed says what the recipes root was composed from (--inferencex,
	// --srt-slurm); nil for a root given as it is.
	Composed   *overlay.Root `json:"composed,omitempty"`
	Keys       []Key         `json:"keys"`
	Listed     int           `json:"listed"`
	Launchable int           `json:"launchable"`
	// NotServed are keys a glob matched whose runner the profile does not
	// serve; they are counted here, not listed (a key named exactly is
	// listed with that reason).
	NotServed []string `json:"not-served"`
}

// ErrNoRecipesRoot: neither the caller, the sweep file nor the cluster
// profile names a recipes root.
var ErrNoRecipesRoot = errors.New("no recipes root")

// RecipesRoot is the directory CONFIG_FILE refs resolve against: root if
// given, else the sweep file's, else the cluster profile's. It must exist,
// or every key would fail for the same reason.
func RecipesRoot(root string, s *config.Sweep, c *config.Cluster) (string, error) {
	from := "--recipes-root"
	switch {
	case root != "":
	case s.RecipesRoot != "":
		root, from = s.RecipesRoot, strictyaml.DisplayPath(s.Path)+": recipes-root"
	case c.RecipesRoot != "" || c.InferenceX != "":
		var err error
		if root, err = overlay.RecipesRoot(c); err != nil {
			return "", err
		}
		from = strictyaml.DisplayPath(c.Path) + ": recipes-root"
	default:
		return "", ErrNoRecipesRoot
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s: recipes root %s is not a directory on this machine; give --recipes-root DIR (an srt-slurm checkout) or --inferencex DIR [--srt-slurm DIR]", from, root)
	}
	return abs, nil
}

// Check checks every key of the sweep's config keys (globs resolved
// against master) on cluster c: keys on runners c does not serve are
// listed with that reason when named exactly, else only counted.
func Check(s *config.Sweep, c *config.Cluster, master *ixconfig.Master, runners *ixconfig.Runners, root, launcher string) (Report, error) {
	keys, err := matrix.ResolveKeys(master, s.ConfigKeys)
	if err != nil {
		return Report{}, err
	}
	exact := map[string]bool{}
	for _, p := range s.ConfigKeys {
		if !strings.ContainsAny(p, "*?") {
			exact[p] = true
		}
	}
	rep := Report{Cluster: c.Name, RecipesRoot: root, NotServed: []string{}}
	rep.Composed, _ = overlay.Open(root)
	for _, key := range keys {
		e := master.Entry(key)
		if !c.ServesRunner(e.Runner) {
			if !exact[key] {
				rep.NotServed = append(rep.NotServed, key)
				continue
			}
			rep.Keys = append(rep.Keys, Key{Key: key, Runner: e.Runner,
				Reason: fmt.Sprintf("runner %s is not served by %s (it serves %s)", e.Runner, c.Name, strings.Join(c.Runners, ", "))})
			continue
		}
		rep.Keys = append(rep.Keys, checkKey(key, e, master, runners, s, c, rep.Composed, root, launcher))
	}
	rep.Listed = len(rep.Keys)
	for _, k := range rep.Keys {
		if k.Launchable {
			rep.Launchable++
		}
	}
	return rep, nil
}

// checkKey plans one served key, looks for its recipes and renders each
// one on a placeholder allocation of its footprint.
func checkKey(key string, e *ixconfig.Entry, master *ixconfig.Master, runners *ixconfig.Runners, s *config.Sweep,
	c *config.Cluster, composed *overlay.Root, root, launcher string) Key {
	k := Key{Key: key, Runner: e.Runner, Served: true}
	// launchErr: what InferenceX's launcher would refuse or run otherwise
	// (a shell launcher, a recipe only other keys get).
	var launchErr, planErr, refErr, renderErr error
	ixLauncher := overlay.LauncherOf(e.Runner, runners)

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
		lane := overlay.LaneOf(row)
		if err := overlay.Launches(ixLauncher, lane); err != nil {
			launchErr = cmp.Or(launchErr, err)
		} else if composed != nil {
			launchErr = cmp.Or(launchErr, composed.Check(ixLauncher, lane, ref))
		}
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
	k.Launchable = launchErr == nil && k.Plans && k.Renders && k.Found == k.Recipes && len(k.UnknownModels) == 0
	switch {
	case launchErr != nil:
		k.Reason = errtext.FirstLine(launchErr)
	case len(k.Missing) > 0:
		k.Reason = fmt.Sprintf("recipe %s not found", k.Missing[0])
		if n := len(k.Missing) - 1; n > 0 {
			k.Reason += fmt.Sprintf(" (and %d more)", n)
		}
	case planErr != nil:
		k.Reason = errtext.FirstLine(planErr)
	case refErr != nil:
		k.Reason = errtext.FirstLine(refErr)
	case renderErr != nil:
		k.Reason = errtext.FirstLine(renderErr)
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
	model := r.ModelDir(c)
	name := filepath.Base(model)
	if model == "" {
		if !strings.HasPrefix(r.Model.Path, "hf:") {
			alias = r.Model.Path
		}
		name = r.ModelName()
	}
	return alias, srtlaunch.Preflight(r, c.GPUsPerNode, name, al)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Write prints the report as a table with a summary line.
func Write(out io.Writer, rep Report) error {
	fmt.Fprintf(out, "launch check on %s, recipes under %s\n", rep.Cluster, strictyaml.DisplayPath(rep.RecipesRoot))
	if o := rep.Composed; o != nil {
		fmt.Fprintf(out, "composed as InferenceX's launchers lay it (%s): %s over %s\n", o.Layout, o.InferenceX, o.SrtSlurm)
	}
	fmt.Fprintln(out)
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
