package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/inferencex/changelog"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/plan"
)

func init() {
	register("plan", func() *cobra.Command {
		var f planFlags
		c := &cobra.Command{Use: "plan", Short: "expand a sweep into points (nodes, GPUs, evals) or print InferenceX matrix JSON",
			Long: `Expands a sweep into points (nodes, GPUs, evals), or prints the InferenceX
matrix JSON of master config files.

usage:
  starter plan --sweep configs/sweeps/dsv4-gb200-agentx.yaml [--cluster FILE] [--json]
  starter plan --config-files F... --runner-config R --config-keys K... [--no-evals|--evals-only] --format ix-json
  starter plan --sweep FILE --changelog perf-changelog.yaml [--entry N|--since N] [--json]
               (dry run of sweep start --changelog: the points the chosen entries run;
               evals-only/all-evals keys plan eval-only points)
  starter plan --sweep FILE --changelog perf-changelog.yaml [--entry N|--since N] --format ix-json
               (the entries' matrix in InferenceX's changelog buckets)
  starter plan --config-files F... --runner-config R --config-keys '*' --recipes-root SRT_SLURM
               --cluster PROFILE --launchable [--json]
               (what the cluster can launch: per key whether it plans, finds its
               recipes and renders them, else why not; then the count)`,
			Annotations: map[string]string{annotationListFlags: strings.Join(planListFlags, ",")},
			Args:        noArgs,
			RunE:        func(*cobra.Command, []string) error { return runPlan(&f) }}
		f.bind(c.Flags())
		return c
	})
}

// listFlag is a repeatable flag; `--flag a b c` is rewritten to
// `--flag a --flag b --flag c` first, as InferenceX's argparse nargs='+'.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }
func (l *listFlag) Type() string       { return "strings" }

// annotationListFlags marks a command whose list flags take every following
// non-flag argument; it holds their comma-separated names.
const annotationListFlags = "sweepflow/list-flags"

var planListFlags = []string{"config-files", "config-keys", "conc", "seq-lens", "scenario-type"}

// expandListArgs lets list flags take every following non-flag argument.
func expandListArgs(args []string, lists []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || strings.Contains(name, "=") || !slices.Contains(lists, name) {
			out = append(out, a)
			continue
		}
		j := i + 1
		for ; j < len(args) && !strings.HasPrefix(args[j], "-"); j++ {
			out = append(out, "--"+name, args[j])
		}
		if j == i+1 {
			out = append(out, a) // no value: let flag report it
		}
		i = j - 1
	}
	return out
}

type planFlags struct {
	sweep, cluster, runnerConfig, format, launcherVersion, nodeFilter string
	recipes                                                           recipesFlags
	configFiles, configKeys, concs, seqLens, scenarioTypes            listFlag
	noEvals, evalsOnly, jsonOut, launchable, onePointPerKey           bool
	indent                                                            int
	changelog                                                         control.ChangelogRef
	sets                                                              recipeSets
}

func (f *planFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.sweep, "sweep", "", "sweep file (configs/sweeps/*.yaml)")
	fs.StringVar(&f.cluster, "cluster", "", "cluster profile; overrides the sweep's")
	f.recipes.bind(fs)
	f.sets.bind(fs, "every recipe the plan reads")
	fs.Var(&f.configFiles, "config-files", "master config files (InferenceX format); several may follow the flag")
	fs.StringVar(&f.runnerConfig, "runner-config", "", "runners file (default configs/runners.yaml without --sweep)")
	fs.Var(&f.configKeys, "config-keys", "config keys or globs; several may follow the flag")
	fs.BoolVar(&f.noEvals, "no-evals", false, "throughput rows only (InferenceX --no-evals); for plans: no evals")
	fs.BoolVar(&f.evalsOnly, "evals-only", false, "eval rows only (InferenceX --evals-only)")
	fs.StringVar(&f.format, "format", "table", "table | json | ix-json")
	fs.BoolVar(&f.jsonOut, "json", false, "same as --format json")
	fs.BoolVar(&f.launchable, "launchable", false, "per config key: does it plan on --cluster, are its recipes under the recipes root, do they render; then a count")
	fs.BoolVar(&f.onePointPerKey, "one-point-per-key", false, "one point per config key: its lowest concurrency (with the key's eval, if it has one)")
	fs.IntVar(&f.indent, "indent", 0, "ix-json: indent like json.dumps(indent=N); 0 prints one line as InferenceX does")
	fs.Var(&f.concs, "conc", "ix-json: keep only these concurrencies")
	fs.Var(&f.seqLens, "seq-lens", "ix-json: 1k1k and/or 8k1k")
	fs.Var(&f.scenarioTypes, "scenario-type", "ix-json: fixed-seq-len and/or agentic-coding")
	fs.StringVar(&f.nodeFilter, "runner-node-filter", "", "ix-json: expand the runner label into runners containing this text")
	fs.StringVar(&f.launcherVersion, "launcher-version", "", "launcher version hashed into fingerprints (default from the cluster)")
	fs.StringVar(&f.changelog.Path, "changelog", "", "plan the keys, scenario types and evals of perf-changelog entries (what sweep start --changelog runs)")
	fs.IntVar(&f.changelog.Entry, "entry", 0, "with --changelog: entry N (1-based; negative counts from the end)")
	fs.IntVar(&f.changelog.Since, "since", 0, "with --changelog: entries N to the last (default: the last entry)")
}

func runPlan(f *planFlags) error {
	if f.jsonOut {
		f.format = "json"
	}
	if f.noEvals && f.evalsOnly {
		return &exitError{code: 2, msg: "--no-evals and --evals-only are mutually exclusive"}
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	return runPlanTo(out, f)
}

func runPlanTo(out io.Writer, f *planFlags) error {
	if f.changelog.Path == "" && (f.changelog.Entry != 0 || f.changelog.Since != 0) {
		return usageError("--entry and --since need --changelog")
	}
	if f.changelog.Entry != 0 && f.changelog.Since != 0 {
		return usageError("--entry and --since are mutually exclusive")
	}
	if f.launchable {
		return planLaunchable(out, f)
	}
	switch f.format {
	case "ix-json":
		if f.changelog.Path != "" {
			return planChangelogIXJSON(out, f)
		}
		return planIXJSON(out, f)
	case "table", "json":
		return planPoints(out, f)
	}
	return &exitError{code: 2, msg: fmt.Sprintf("unknown --format %q (want table, json or ix-json)", f.format)}
}

// configError turns loader errors into one clean line and exit status 1.
func configError(err error) error {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	return &exitError{code: 1, msg: msg}
}

// sweepFromFlags loads --sweep (if any) and applies flag overrides.
func sweepFromFlags(f *planFlags) (*config.Sweep, error) {
	var s *config.Sweep
	if f.sweep != "" {
		var err error
		if s, err = config.LoadSweep(f.sweep); err != nil {
			return nil, configError(err)
		}
	} else {
		s = &config.Sweep{Name: "adhoc", Evals: true, RunnerConfig: "configs/runners.yaml"}
	}
	if len(f.configFiles) > 0 {
		s.ConfigFiles = f.configFiles
	}
	if len(f.configKeys) > 0 {
		s.ConfigKeys = f.configKeys
	}
	if f.runnerConfig != "" {
		s.RunnerConfig = f.runnerConfig
	}
	if f.cluster != "" {
		s.ClusterPath = f.cluster
	}
	if f.noEvals {
		s.Evals = false
	}
	if len(s.ConfigFiles) == 0 || (len(s.ConfigKeys) == 0 && f.changelog.Path == "") {
		return nil, &exitError{code: 2, msg: "give --sweep FILE, or --config-files and --config-keys"}
	}
	return s, nil
}

func planIXJSON(out io.Writer, f *planFlags) error {
	s, err := sweepFromFlags(f)
	if err != nil {
		return err
	}
	var errs strictyaml.Errors
	master, err := ixconfig.LoadMaster(s.ConfigFiles...)
	appendErr(&errs, err)
	runners, err := ixconfig.LoadRunners(s.RunnerConfig)
	appendErr(&errs, err)
	if len(errs) > 0 {
		return configError(errs)
	}
	opts := matrix.Options{Keys: s.ConfigKeys, EvalsOnly: f.evalsOnly, SeqLens: f.seqLens, ScenarioTypes: f.scenarioTypes, RunnerNodeFilter: f.nodeFilter}
	for _, c := range f.concs {
		n, err := strconv.Atoi(c)
		if err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("--conc %q: expected an integer", c)}
		}
		opts.Conc = append(opts.Conc, n)
	}
	for _, sl := range f.seqLens {
		if sl != "1k1k" && sl != "8k1k" {
			return &exitError{code: 2, msg: fmt.Sprintf("--seq-lens %q: expected 1k1k or 8k1k", sl)}
		}
	}
	for _, st := range f.scenarioTypes {
		if st != matrix.FixedSeqLen && st != matrix.AgenticCoding {
			return &exitError{code: 2, msg: fmt.Sprintf("--scenario-type %q: expected fixed-seq-len or agentic-coding", st)}
		}
	}
	rows, err := matrix.Generate(master, runners, opts)
	if err != nil {
		return configError(err)
	}
	if !f.noEvals && !f.evalsOnly {
		rows = matrix.MarkEvals(rows) // InferenceX's mode with neither flag
	}
	data, err := matrix.EncodeIXJSON(rows, f.indent)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}

// planChangelogIXJSON prints the chosen changelog entries' matrix as
// InferenceX's changelog planner does: throughput and eval rows in
// run-sweep.yml's buckets, plus the entries.
func planChangelogIXJSON(out io.Writer, f *planFlags) error {
	if f.noEvals || f.evalsOnly || len(f.concs) > 0 || len(f.seqLens) > 0 || len(f.scenarioTypes) > 0 || f.nodeFilter != "" {
		return usageError("--changelog with --format ix-json takes its keys, scenarios and evals from the entries; drop --no-evals, --evals-only, --conc, --seq-lens, --scenario-type and --runner-node-filter")
	}
	s, err := sweepFromFlags(f)
	if err != nil {
		return err
	}
	entries, err := changelog.LoadSelected(f.changelog.Path, f.changelog.Entry, f.changelog.Since)
	if err != nil {
		return configError(err)
	}
	var errs strictyaml.Errors
	master, err := ixconfig.LoadMaster(s.ConfigFiles...)
	appendErr(&errs, err)
	runners, err := ixconfig.LoadRunners(s.RunnerConfig)
	appendErr(&errs, err)
	if len(errs) > 0 {
		return configError(errs)
	}
	sel, err := changelog.Resolve(entries, master)
	if err != nil {
		return configError(err)
	}
	obj, err := sel.Matrix(master, runners)
	if err != nil {
		return configError(err)
	}
	data, err := matrix.EncodeCompact(obj, f.indent)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}

func appendErr(errs *strictyaml.Errors, err error) {
	switch e := err.(type) {
	case nil:
	case strictyaml.Errors:
		*errs = append(*errs, e...)
	case *strictyaml.Error:
		*errs = append(*errs, e)
	default:
		*errs = append(*errs, &strictyaml.Error{Msg: err.Error()})
	}
}

func planPoints(out io.Writer, f *planFlags) error {
	if f.evalsOnly {
		return &exitError{code: 2, msg: "--evals-only applies to --format ix-json; plans mark evals in the EVAL column"}
	}
	s, err := sweepFromFlags(f)
	if err != nil {
		return err
	}
	if s.ClusterPath == "" {
		return &exitError{code: 2, msg: "no cluster profile: give --cluster FILE or set cluster in the sweep file"}
	}
	cluster, err := config.LoadCluster(s.ClusterPath)
	if err != nil {
		return configError(err)
	}
	root, err := f.recipes.resolve()
	if err != nil {
		return err
	}
	if err := f.sets.check(); err != nil {
		return err
	}
	opts := plan.Options{Sweep: s, Cluster: cluster, LauncherVersion: f.launcherVersion, RecipesRoot: root, OnePointPerKey: f.onePointPerKey, RecipeSets: f.sets}
	if f.changelog.Path != "" {
		sel, err := control.ApplyChangelog(f.changelog, s, &opts)
		if err != nil {
			return configError(err)
		}
		if f.format != "json" {
			for _, l := range sel.Describe() {
				fmt.Fprintln(out, "changelog "+l)
			}
		}
	}
	p, err := plan.Build(opts)
	if err != nil {
		return configError(err)
	}
	warnRecipes(os.Stderr, p)
	if f.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(p.Summary())
	}
	if err := p.WriteTable(out); err != nil {
		return err
	}
	for _, a := range s.Adaptive {
		fmt.Fprintf(out, "adaptive: %s (points decided while the sweep runs; starter forecast shows the worst case)\n", a)
	}
	return nil
}

// warnRecipes prints, once per recipe, what a plan's recipes mean
// differently from how they read (a key written twice: srt-slurm launches
// the later value).
func warnRecipes(w io.Writer, p *plan.Plan) {
	seen := map[*config.Recipe]bool{}
	for _, pt := range p.Points {
		if r := pt.Recipe; r != nil && !seen[r] {
			seen[r] = true
			for _, warn := range r.Warnings {
				fmt.Fprintf(w, "warning: %s\n", warn.Error())
			}
		}
	}
}
