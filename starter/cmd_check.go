package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan/budgetcheck"
	"github.com/sweepflow/sweepflow/results"
)

func init() {
	register("check", func() *cobra.Command {
		var f checkFlags
		c := &cobra.Command{Use: "check", Short: "run the reviewer checklist rules over a sweep's rows, recipes and golden AL before any GPU time",
			Long: `Runs the machine-checkable rules of InferenceX's sign-off checklist over the
master config rows, their srt-slurm recipes and the golden AL tables. Each
finding is one line: rule id, file:line, the offending value, the expected one.

usage:
  starter check --sweep configs/sweeps/dsv4-gb200-agentx.yaml [--inferencex DIR] [--base REF-DIR] [--json]
  starter check --config-files F... --config-keys K... [--runner-config R] [--recipes-root D]
                [--golden-al FILE|DIR] [--models MODELS.md] [--base REF-DIR] [--allow RULE]
  starter check --sweep FILE --changelog perf-changelog.yaml [--entry N|--since N] [--base REF-DIR]
                (the chosen entries' fields and keys; with --base, the entries added
                 relative to REF-DIR's changelog, and their append-only promise)
  starter check --sweep FILE --added SWEEP_ID [--results DSN]
                (also the points SWEEP_ID's adaptive searches added, as if appended to
                 their rows' conc-lists: InferenceX's append-only convention)

rules:
` + ruleList() + `
Exit status: 0 no failures, 1 failures (or unreadable inputs), 2 usage error.`,
			Annotations: map[string]string{annotationListFlags: "config-files,config-keys"},
			Args:        noArgs,
			RunE:        func(c *cobra.Command, _ []string) error { return runCheck(c.OutOrStdout(), &f, c.Flags()) }}
		f.bind(c.Flags())
		return c
	})
}

func ruleList() string {
	var b strings.Builder
	for _, r := range checklist.Rules {
		fmt.Fprintf(&b, "  %-20s %s\n", r.ID, r.What)
	}
	return b.String()
}

type checkFlags struct {
	sweep, cluster, runnerConfig, golden, models, today, base, changelog string
	recipes                                                              recipesFlags
	entry, since                                                         int
	configFiles, configKeys                                              listFlag
	allow                                                                multiFlag
	thinking, jsonOut                                                    bool
	// home and results name the ledger whose bring-up times judge the
	// recipes' health_check budgets (skipped when there is none).
	home, results string
	// added names a sweep whose added points are checked too.
	added string
}

func (f *checkFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.sweep, "sweep", "", "sweep file (configs/sweeps/*.yaml)")
	fs.StringVar(&f.cluster, "cluster", "", "cluster profile (its recipes root is used when the sweep names none)")
	fs.Var(&f.configFiles, "config-files", "master config files (InferenceX format); several may follow the flag")
	fs.StringVar(&f.runnerConfig, "runner-config", "", "runners file (GPUs per node per runner)")
	fs.Var(&f.configKeys, "config-keys", "config keys or globs; several may follow the flag")
	f.recipes.bind(fs)
	fs.Lookup("inferencex").Usage = "InferenceX checkout: MODELS.md and golden_al_distribution/ come from it unless given; with --srt-slurm (or when it pins srt-slurm at utils/srt-slurm) its recipes are laid over srt-slurm's as its launchers lay them"
	fs.StringVar(&f.golden, "golden-al", "", "golden AL file or directory (InferenceX golden_al_distribution/); default: the sweep's golden-al")
	fs.BoolVar(&f.thinking, "thinking", true, "compare with thinking_on golden values (false: thinking_off); default: the sweep's")
	fs.StringVar(&f.models, "models", "", "InferenceX MODELS.md for the deprecation rule (skipped when not given)")
	fs.StringVar(&f.today, "today", "", "review date YYYY-MM-DD for MODELS.md effective dates (default: today, UTC)")
	fs.StringVar(&f.base, "base", "", "directory with the base copy of the config files (and recipes) for the append-only rule")
	fs.Var(&f.allow, "allow", "waive this rule's findings: reported, but not failing (repeatable)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the findings as JSON")
	fs.StringVar(&f.changelog, "changelog", "", "InferenceX perf-changelog.yaml: check the chosen entries and the keys they select")
	fs.IntVar(&f.entry, "entry", 0, "with --changelog: check entry N (1-based; negative counts from the end)")
	fs.IntVar(&f.since, "since", 0, "with --changelog: check entries N to the last")
	fs.StringVar(&f.home, "home", envOr("SWEEPFLOW_HOME", ".sweepflow"), "local state directory (its results.db judges health_check budgets)")
	fs.StringVar(&f.results, "results", os.Getenv("SWEEPFLOW_RESULTS"), "results store DSN whose bring-up times judge the recipes' health_check budgets (default: <home>/results.db when it exists)")
	fs.StringVar(&f.added, "added", "", "check the points this sweep's adaptive searches added (read from the ledger) against the append-only convention, as if appended to their rows' conc-lists")
}

// checkOptions turns the flags (and the sweep file) into review options.
func checkOptions(f *checkFlags, fs *flag.FlagSet) (checklist.Options, error) {
	root, err := f.recipes.checkRoot()
	if err != nil {
		return checklist.Options{}, err
	}
	o := checklist.Options{Thinking: f.thinking, RecipesRoot: root, GoldenAL: f.golden, Models: f.models, Base: f.base,
		Changelog: f.changelog, ChangelogEntry: f.entry, ChangelogSince: f.since}
	if f.changelog == "" && (f.entry != 0 || f.since != 0) {
		return o, usageError("--entry and --since need --changelog")
	}
	if f.entry != 0 && f.since != 0 {
		return o, usageError("--entry and --since are mutually exclusive")
	}
	if f.sweep != "" {
		s, err := config.LoadSweep(f.sweep)
		if err != nil {
			return o, configError(err)
		}
		if err := o.FromSweep(s, f.cluster, fs != nil && fs.Changed("thinking")); err != nil {
			return o, configError(err)
		}
	}
	if len(f.configFiles) > 0 {
		o.ConfigFiles = f.configFiles
	}
	if f.changelog != "" {
		o.ConfigKeys = nil // the changelog's entries select the keys
	}
	if len(f.configKeys) > 0 {
		o.ConfigKeys = f.configKeys
	}
	if f.runnerConfig != "" {
		o.RunnerConfig = f.runnerConfig
	}
	if len(o.ConfigFiles) == 0 || (len(o.ConfigKeys) == 0 && f.changelog == "") {
		return o, usageError("give --sweep FILE, or --config-files and --config-keys")
	}
	if f.recipes.inferencex != "" {
		if o.Models == "" {
			o.Models = firstExisting(filepath.Join(f.recipes.inferencex, "MODELS.md"), filepath.Join(f.recipes.inferencex, "review", "MODELS.md"))
		}
		if o.GoldenAL == "" {
			o.GoldenAL = firstExisting(filepath.Join(f.recipes.inferencex, "utils", "golden_al_distribution"), filepath.Join(f.recipes.inferencex, "golden_al_distribution"))
		}
	}
	if f.today != "" {
		t, err := time.Parse("2006-01-02", f.today)
		if err != nil {
			return o, usageError("--today %q: expected YYYY-MM-DD", f.today)
		}
		o.Today = t
	}
	for _, a := range f.allow {
		if !checklist.KnownRule(a) {
			return o, usageError("--allow %q: unknown rule (see starter check --help)", a)
		}
	}
	if f.added != "" {
		lf := ledgerFlags{home: f.home, results: f.results}
		store, _, _, err := lf.open(context.Background())
		if err != nil {
			return o, err
		}
		defer store.Close()
		if o.Added, err = control.AddedPoints(context.Background(), store, f.added); err != nil {
			return o, err
		}
	}
	return o, nil
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func runCheck(out io.Writer, f *checkFlags, fs *flag.FlagSet) error {
	rep, err := checkReport(f, fs)
	if err != nil {
		return err
	}
	warnings, err := healthBudgets(f)
	if err != nil {
		// The reviewer rules stand on their own: a sweep that does not
		// plan here leaves the budgets unjudged, with why.
		rep.Notes = append(rep.Notes, "health_check budgets not judged against the ledger: "+errtext.Folded(err))
	}
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checkJSON{Report: rep, Failures: rep.Failures(), Pass: rep.Failures() == 0, HealthBudgets: warnings}); err != nil {
			return err
		}
	} else {
		rep.Write(out)
		for _, w := range warnings {
			fmt.Fprintf(out, "warning: %s\n", w)
		}
	}
	if n := rep.Failures(); n > 0 {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%d failing finding(s)", n)}
	}
	return nil
}

type checkJSON struct {
	*checklist.Report
	Failures int  `json:"failures"`
	Pass     bool `json:"pass"`
	// HealthBudgets are warnings, not failures: budgets below the
	// observed bring-up p90 plus a margin.
	HealthBudgets []budgetcheck.Warning `json:"health_budget_warnings,omitempty"`
}

// healthBudgets judges the sweep's health_check budgets by the ledger's
// bring-up times, when there is a sweep and a ledger.
func healthBudgets(f *checkFlags) ([]budgetcheck.Warning, error) {
	if f.sweep == "" || f.changelog != "" {
		return nil, nil
	}
	dsn := f.results
	if dsn == "" {
		dsn = filepath.Join(f.home, "results.db")
		if _, err := os.Stat(dsn); err != nil {
			return nil, nil
		}
	}
	ctx := context.Background()
	store, err := results.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return control.HealthBudgets(ctx, store, f.sweep, f.cluster)
}

// reviewSweep runs `starter check --sweep FILE` for `sweep start`.
// With a changelog, the keys its chosen entries select are checked, and
// the entries themselves.
func reviewSweep(sweepFile, clusterFile, recipesRoot string, keys, allow []string, cl *control.ChangelogRef) (*checklist.Report, error) {
	f := &checkFlags{sweep: sweepFile, cluster: clusterFile, thinking: true, allow: allow, recipes: recipesFlags{root: recipesRoot}, configKeys: keys}
	if cl != nil {
		f.changelog, f.entry, f.since = cl.Path, cl.Entry, cl.Since
	}
	return checkReport(f, nil)
}

// checkReport runs the rules the flags select and waives the --allow'ed ones.
func checkReport(f *checkFlags, fs *flag.FlagSet) (*checklist.Report, error) {
	o, err := checkOptions(f, fs)
	if err != nil {
		return nil, err
	}
	rep, err := checklist.Check(o)
	if err != nil {
		return nil, configError(err)
	}
	rep.Allow(f.allow)
	return rep, nil
}
