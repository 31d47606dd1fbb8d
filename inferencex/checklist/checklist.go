// Package checklist runs the machine-checkable rules of InferenceX's reviewer
// sign-off checklist (checks 6-12) over master config rows, their srt-slurm
// recipes and the golden acceptance-length tables, before any GPU time is
// spent. Every finding names a stable rule id, the file:line where the
// offending value is written, that value and the value the rule expects.
package checklist

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/inferencex/overlay"
)

// Rule ids. They are stable: `--allow RULE`, sweep memos and scripts use them.
const (
	RuleUpstreamImage   = "upstream-image"     // check 6a
	RuleEngineFirst     = "engine-first"       // check 6b
	RuleDeprecated      = "deprecated"         // check 7
	RuleArchOverride    = "arch-override"      // check 8
	RuleSpecChat        = "spec-chat-endpoint" // check 9
	RuleEnginePatch     = "engine-patch"       // check 10
	RuleAgenticGoldenAL = "agentic-golden-al"  // check 11a/b
	RuleNonAgenticSimAL = "non-agentic-sim-al" // check 11, last bullet
	RuleAppendOnly      = "append-only"        // check 12
	RuleRecipeRow       = "recipe-row"         // recipe versus row consistency
)

// Rules lists every rule id with the checklist item it implements.
var Rules = []struct{ ID, What string }{
	{RuleUpstreamImage, "vLLM/SGLang rows on established SKUs run upstream vllm/ or lmsysorg/ images (check 6a)"},
	{RuleEngineFirst, "a non-vLLM/SGLang engine needs a vLLM or SGLang entry for the same model and SKU first (check 6b)"},
	{RuleDeprecated, "no rows for models or scenarios MODELS.md deprecates as of the review date (check 7)"},
	{RuleArchOverride, "no architecture-changing overrides (hf-overrides, json-model-override-args, trimmed layers/experts) (check 8)"},
	{RuleSpecChat, "speculative-decoding benchmarks drive a chat endpoint/template (check 9)"},
	{RuleEnginePatch, "no engine patches in recipes or setup scripts (check 10)"},
	{RuleAgenticGoldenAL, "agentic spec-decode rows simulate acceptance at exactly the golden AL (check 11)"},
	{RuleNonAgenticSimAL, "no simulated acceptance on non-agentic rows (check 11)"},
	{RuleAppendOnly, "changes only add points: every base point stays with the same row and recipe (check 12)"},
	{RuleRecipeRow, "the recipe deploys what the row says: workers, TP, EP, DP-attention, GPUs per node, claimed concurrency"},
	{RuleChangelog, "the chosen perf-changelog entries are well formed, their keys resolve, and the changelog only grew (with --base)"},
}

// KnownRule reports whether id is a rule id.
func KnownRule(id string) bool {
	for _, r := range Rules {
		if r.ID == id {
			return true
		}
	}
	return false
}

// Finding is one failed rule at one place.
type Finding struct {
	Rule      string         `json:"rule"`
	Pos       strictyaml.Pos `json:"pos"`
	Field     string         `json:"field,omitempty"`
	ConfigKey string         `json:"config_key,omitempty"`
	Got       string         `json:"got"`
	Want      string         `json:"want,omitempty"`
	Allowed   bool           `json:"allowed,omitempty"` // waived with --allow
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Rule)
	b.WriteString(" ")
	b.WriteString(f.Pos.String())
	b.WriteString(": ")
	if f.Field != "" {
		b.WriteString(f.Field)
		b.WriteString(": ")
	}
	if f.Want == "" { // a message that says it all (changelog problems)
		b.WriteString(f.Got)
	} else {
		fmt.Fprintf(&b, "got %s; want %s", f.Got, f.Want)
	}
	if f.Allowed {
		b.WriteString(" (allowed)")
	}
	return b.String()
}

// Report is the outcome of a check.
type Report struct {
	Findings []Finding `json:"findings"`
	// Notes say what was not checked and why (a rule skipped for lack of
	// input, a recipe kind the rule does not read).
	Notes   []string `json:"notes"`
	Rows    int      `json:"rows"`
	Recipes int      `json:"recipes"`
	Rules   []string `json:"rules"` // rules that ran
	// GoldenCompared counts simulated-acceptance settings compared with a
	// golden AL value.
	GoldenCompared int `json:"golden_compared"`
}

// Failures counts findings that are not allowed.
func (r *Report) Failures() int {
	n := 0
	for _, f := range r.Findings {
		if !f.Allowed {
			n++
		}
	}
	return n
}

// Allow marks findings of the given rules as waived.
func (r *Report) Allow(rules []string) {
	for i := range r.Findings {
		if slices.Contains(rules, r.Findings[i].Rule) {
			r.Findings[i].Allowed = true
		}
	}
}

// Options says what to check.
type Options struct {
	ConfigFiles  []string
	RunnerConfig string // "" skips the GPUs-per-node comparison
	ConfigKeys   []string
	// RecipesRoot resolves CONFIG_FILE=; "" skips the recipe rules with a note.
	RecipesRoot string
	// GoldenAL is a golden AL file or a directory of them (InferenceX's
	// golden_al_distribution/); "" skips the value comparison with a note.
	GoldenAL string
	// Inject is the golden AL table sweepflow's launcher injects from at
	// perf time (a sweep's golden-al:): an SGLang agentic row needs no
	// simulated-acceptance setting of its own, and the injected value is
	// compared with GoldenAL like any other. GoldenAL defaults to it.
	Inject   string
	Thinking bool
	// Models is InferenceX's MODELS.md; "" skips the deprecation rule.
	Models string
	Today  time.Time
	// Base is a directory holding the base copy of the config files (and,
	// at the same root-relative paths, recipes) for the append-only rule.
	Base string
	// Changelog is a perf-changelog.yaml: its chosen entries are checked
	// and, when ConfigKeys is empty, their keys are the keys checked.
	// ChangelogEntry / ChangelogSince choose entries as changelog.Select;
	// with neither, the entries added relative to Base's copy (or the last).
	Changelog                      string
	ChangelogEntry, ChangelogSince int
	// Added are the points an adaptive search added to a sweep (`check
	// --added SWEEP`): each must keep to the append-only convention.
	Added []Added
}

// FromSweep sets what a sweep file implies: its config files, runners,
// keys, golden AL and thinking mode (unless keepThinking), and its recipes
// root unless one is set, else that of its cluster profile (clusterFile
// overriding the sweep's cluster).
func (o *Options) FromSweep(s *config.Sweep, clusterFile string, keepThinking bool) error {
	o.ConfigFiles, o.RunnerConfig, o.ConfigKeys = s.ConfigFiles, s.RunnerConfig, s.ConfigKeys
	o.Inject = s.GoldenAL
	if !keepThinking {
		o.Thinking = s.Thinking
	}
	if o.RecipesRoot == "" {
		o.RecipesRoot = s.RecipesRoot
	}
	cl := cmp.Or(clusterFile, s.ClusterPath)
	if o.RecipesRoot == "" && cl != "" {
		c, err := config.LoadCluster(cl)
		if err != nil {
			return err
		}
		if o.RecipesRoot, err = overlay.RecipesRoot(c); err != nil {
			return err
		}
	}
	return nil
}

// Check loads everything opts names and runs every rule. Errors are inputs
// that cannot be read or are invalid; rule failures are findings.
func Check(opts Options) (*Report, error) {
	if opts.Today.IsZero() {
		opts.Today = time.Now().UTC()
	}
	master, err := ixconfig.LoadMaster(opts.ConfigFiles...)
	if err != nil {
		return nil, err
	}
	var runners *ixconfig.Runners
	if opts.RunnerConfig != "" {
		if runners, err = ixconfig.LoadRunners(opts.RunnerConfig); err != nil {
			return nil, err
		}
	}
	var clFindings []Finding
	var clNotes []string
	if opts.Changelog != "" {
		var keys []string
		if clFindings, clNotes, keys, err = changelogStep(opts, master); err != nil {
			return nil, err
		}
		if len(opts.ConfigKeys) == 0 {
			opts.ConfigKeys = keys
		}
		if len(opts.ConfigKeys) == 0 { // nothing resolved: report the changelog alone
			return &Report{Findings: clFindings, Notes: clNotes, Rules: []string{RuleChangelog}}, nil
		}
	}
	rows, err := matrix.Generate(master, runners, matrix.Options{Keys: opts.ConfigKeys})
	if err != nil {
		return nil, err
	}
	c := &checker{opts: opts, master: master, runners: runners, rows: rows,
		recipes: map[string]*recipeView{}, report: &Report{Rows: len(rows)}, seen: map[string]bool{}}
	if opts.Changelog != "" {
		c.ranRule(RuleChangelog)
		for _, f := range clFindings {
			c.add(f)
		}
		for _, n := range clNotes {
			c.note("%s", n)
		}
	}
	if opts.GoldenAL == "" {
		opts.GoldenAL = opts.Inject
		c.opts.GoldenAL = opts.Inject
	}
	if opts.GoldenAL != "" {
		if c.golden, err = loadGolden(opts.GoldenAL); err != nil {
			return nil, err
		}
	}
	if opts.Inject == opts.GoldenAL {
		c.inject = c.golden
	} else if opts.Inject != "" {
		if c.inject, err = loadGolden(opts.Inject); err != nil {
			return nil, err
		}
	}
	if opts.Models != "" {
		if c.models, err = LoadModels(opts.Models); err != nil {
			return nil, err
		}
	}
	c.run()
	c.added()
	if opts.Base != "" {
		if err := c.appendOnly(); err != nil {
			return nil, err
		}
	}
	r := c.report
	if o, ok := overlay.Open(opts.RecipesRoot); ok {
		// A composed root lives in a cache: name its recipes as CONFIG_FILE does.
		trim := func(s string) string { return strings.ReplaceAll(s, o.Dir+string(filepath.Separator), "") }
		for i := range r.Findings {
			f := &r.Findings[i]
			f.Pos.File, f.Got, f.Want = trim(f.Pos.File), trim(f.Got), trim(f.Want)
		}
		for i := range r.Notes {
			r.Notes[i] = trim(r.Notes[i])
		}
	}
	sort.SliceStable(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		return a.Rule < b.Rule
	})
	return r, nil
}

type checker struct {
	opts    Options
	master  *ixconfig.Master
	runners *ixconfig.Runners
	rows    []*matrix.Row
	golden  *goldenSet
	inject  *goldenSet // the sweep's table the launcher injects from
	models  *Models
	recipes map[string]*recipeView // by CONFIG_FILE ref
	report  *Report
	seen    map[string]bool // dedupe findings and notes
	ran     []string
}

func (c *checker) add(f Finding) {
	k := f.String()
	if c.seen[k] {
		return
	}
	c.seen[k] = true
	c.report.Findings = append(c.report.Findings, f)
}

func (c *checker) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if c.seen["note:"+s] {
		return
	}
	c.seen["note:"+s] = true
	c.report.Notes = append(c.report.Notes, s)
}

func (c *checker) ranRule(ids ...string) {
	for _, id := range ids {
		if !slices.Contains(c.report.Rules, id) {
			c.report.Rules = append(c.report.Rules, id)
		}
	}
}

func (c *checker) run() {
	c.ranRule(RuleUpstreamImage, RuleEngineFirst, RuleNonAgenticSimAL, RuleAgenticGoldenAL, RuleArchOverride)
	entries := map[string]bool{}
	for _, row := range c.rows {
		if !entries[row.ConfigKey] {
			entries[row.ConfigKey] = true
			c.image(row.Entry)
			c.engineFirst(row.Entry)
		}
	}
	if c.opts.RecipesRoot == "" {
		c.note("no recipes root: %s, %s, %s and the recipe side of the acceptance rules were not checked", RuleRecipeRow, RuleEnginePatch, RuleSpecChat)
	} else {
		c.ranRule(RuleRecipeRow, RuleEnginePatch, RuleSpecChat)
	}
	if c.models == nil {
		c.note("no MODELS.md given (--models or --inferencex): %s not checked", RuleDeprecated)
	} else {
		c.ranRule(RuleDeprecated)
	}
	if c.golden == nil {
		c.note("no golden AL table given: %s checks that acceptance is simulated, not its value", RuleAgenticGoldenAL)
	}
	for _, row := range c.rows {
		rv := c.recipe(row)
		c.rowOverrides(row)
		c.acceptance(row, rv)
		if rv != nil {
			c.recipeRow(row, rv)
			c.specChat(row, rv)
		}
		if c.models != nil {
			c.deprecated(row)
		}
	}
	c.report.Recipes = len(c.recipes)
	for _, rv := range c.recipes {
		if rv != nil {
			c.recipeOverrides(rv)
			c.enginePatches(rv)
		}
	}
}

// recipe loads the row's recipe once; nil when the row names none or the
// recipes root is unknown. A missing recipe is a recipe-row finding: the row
// cannot deploy what it says.
func (c *checker) recipe(row *matrix.Row) *recipeView {
	ref, pos, field := recipeRef(row)
	if ref == "" || c.opts.RecipesRoot == "" {
		return nil
	}
	if rv, ok := c.recipes[ref]; ok {
		return rv
	}
	r, err := config.LoadRecipe(c.opts.RecipesRoot, ref)
	if err != nil {
		c.recipes[ref] = nil
		msg := err.Error()
		if ce, ok := err.(*strictyaml.Error); ok && ce.Pos.File == "" {
			msg = ce.Msg
		}
		c.add(Finding{Rule: RuleRecipeRow, Pos: pos, Field: field, ConfigKey: row.ConfigKey,
			Got: "CONFIG_FILE=" + ref + " (" + msg + ")", Want: "a readable srt-slurm recipe under " + strictyaml.DisplayPath(c.opts.RecipesRoot)})
		return nil
	}
	rv := &recipeView{Recipe: r}
	c.recipes[ref] = rv
	return rv
}

// recipeRef finds CONFIG_FILE= in the row's prefill, then decode settings.
func recipeRef(row *matrix.Row) (string, strictyaml.Pos, string) {
	for _, w := range []*ixconfig.Worker{row.Search.Prefill, row.Search.Decode} {
		if w == nil {
			continue
		}
		for i, s := range w.AdditionalSettings {
			if k, v, ok := strings.Cut(s, "="); ok && strings.TrimSpace(k) == "CONFIG_FILE" {
				return strings.TrimSpace(v), w.SettingPos[i], fmt.Sprintf("%s.additional-settings[%d]", w.Path, i)
			}
		}
	}
	return "", strictyaml.Pos{}, ""
}

// settings yields every additional-settings item of the row's workers.
func settings(row *matrix.Row) []setting {
	var out []setting
	for _, w := range []*ixconfig.Worker{row.Search.Prefill, row.Search.Decode} {
		if w == nil {
			continue
		}
		for i, s := range w.AdditionalSettings {
			k, v, _ := strings.Cut(s, "=")
			out = append(out, setting{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), Raw: s,
				Pos: w.SettingPos[i], Field: fmt.Sprintf("%s.additional-settings[%d]", w.Path, i)})
		}
	}
	return out
}

type setting struct {
	Key, Value, Raw string
	Pos             strictyaml.Pos
	Field           string
}

// engineOf names the inference engine a framework runs: dynamo-sglang
// serves with SGLang, dynamo-trt with TensorRT-LLM.
func engineOf(framework string) string {
	f := strings.ToLower(framework)
	switch {
	case strings.Contains(f, "sglang"):
		return "sglang"
	case strings.Contains(f, "vllm"):
		return "vllm"
	case strings.Contains(f, "trt"):
		return "trtllm"
	case strings.Contains(f, "atom"):
		return "atom"
	}
	return f
}

// resolveBase finds the base copy of a config file under dir: by its path
// relative to the working directory, then by its base name.
func resolveBase(dir, file string) string {
	if rel := strictyaml.DisplayPath(file); !filepath.IsAbs(rel) {
		if p := filepath.Join(dir, rel); exists(p) {
			return p
		}
	}
	return filepath.Join(dir, filepath.Base(file))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Write prints the findings one a line, the notes, and a PASS or FAIL
// summary line, as `starter check` shows them.
func (rep *Report) Write(out io.Writer) {
	for _, fd := range rep.Findings {
		fmt.Fprintln(out, fd.String())
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(out, "note: "+n)
	}
	allowed := len(rep.Findings) - rep.Failures()
	verdict := "PASS"
	if rep.Failures() > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "%s: %d rows, %d recipes, %d rules run (%s): %d failing, %d allowed, %d notes\n",
		verdict, rep.Rows, rep.Recipes, len(rep.Rules), strings.Join(rep.Rules, ", "), rep.Failures(), allowed, len(rep.Notes))
}
