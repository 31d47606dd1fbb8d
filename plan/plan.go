// Package plan turns a sweep into sweep points: it expands the sweep's
// config keys into InferenceX matrix rows, reads each row's srt-slurm recipe
// to size its allocation on the cluster, fingerprints every point and marks
// where InferenceX would run an eval. Nothing is planned if anything is wrong.
package plan

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/goldenal"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/inferencex/overlay"
	"github.com/sweepflow/sweepflow/point"
)

// LauncherVersion versions how sweepflow launches a recipe. Bump it when a
// change in launching makes earlier results incomparable: it is part of every
// point identity, so reruns then stop reusing old stage outputs.
const LauncherVersion = "sweepflow-launch/1"

// ClusterLauncher is the launcher string a cluster's points carry in their
// identities: "<backend>+<launcher>/<LauncherVersion>", with the backend
// "slurm-emulated" on an emulated partition. The emulation runs the real
// launcher but simulator roles behind it, so its figures (and its nightly
// baselines) must never share an identity with the real rack's.
func ClusterLauncher(c *config.Cluster) string {
	backend := c.Backend
	if c.Emulation != nil {
		backend += "-emulated"
	}
	return fmt.Sprintf("%s+%s/%s", backend, c.Launcher, LauncherVersion)
}

// Options says what to plan.
type Options struct {
	Sweep   *config.Sweep
	Cluster *config.Cluster
	// LauncherVersion goes into identities; empty means the cluster's
	// ClusterLauncher, so simulated and real results never share an
	// identity.
	LauncherVersion string
	// RecipesRoot overrides the sweep's and the cluster's recipes root.
	RecipesRoot string
	// KeepRow, when set, keeps only the generated rows it accepts (a
	// changelog entry's scenario-type); KeepEval, when set, keeps only the
	// eval picks on rows it accepts (the entries that select evals).
	KeepRow  func(*matrix.Row) bool `json:"-"`
	KeepEval func(*matrix.Row) bool `json:"-"`
	// EvalOnlyRow, when set, picks the generated rows KeepRow drops that
	// run as eval-only points (a changelog entry's evals-only or
	// all-evals): InferenceX's eval selection of them (matrix.EvalRows),
	// or its all-evals selection when all is true (matrix.AllEvalRows).
	// Such points have no perf stage.
	EvalOnlyRow func(*matrix.Row) (ok, all bool) `json:"-"`
	// RecipeSets are --set dotted.key=value overrides applied, in order, to
	// every recipe of the plan (as srtctl applies them to its recipe).
	RecipeSets []string
	// OnePointPerKey keeps, of each config key, its lowest concurrency on
	// the first row that has it: one deployment per key (a fleet bring-up).
	// The key's eval, when InferenceX selects one, runs on that point.
	OnePointPerKey bool
}

// Plan is the sweep's points, in matrix row order.
type Plan struct {
	SweepName       string          `json:"sweep"`
	Cluster         *config.Cluster `json:"-"`
	RecipesRoot     string          `json:"recipes-root"`
	RecipeSets      []string        `json:"recipe-sets,omitempty"`
	LauncherVersion string          `json:"launcher-version"`
	Points          []Point         `json:"points"`
	// Inputs are the files the plan read (role and absolute path), so a
	// sweep start can keep their bytes with the plan.
	Inputs []Input `json:"inputs"`
	// Rows are the throughput rows the points came from (InferenceX
	// --no-evals output); EvalRows the --evals-only rows.
	Rows     []*matrix.Row `json:"-"`
	EvalRows []*matrix.Row `json:"-"`
}

// Input is one file a plan was made from.
type Input struct {
	Role string `json:"role"` // sweep, cluster, config, runners, recipe, golden-al
	Path string `json:"path"`
}

// Point is one (matrix row, concurrency). Multinode agentic rows hold one
// concurrency, so there a row is a point; the points of a fixed-seq-len row
// share RowIndex and run one after another on the same allocation.
type Point struct {
	Index    int    `json:"index"`
	RowIndex int    `json:"row-index"`
	Scenario string `json:"scenario"`

	ConfigKey    string `json:"config-key"`
	ExpName      string `json:"exp-name"`
	Topology     string `json:"topology"`
	Image        string `json:"image"`
	Model        string `json:"model"`
	ModelPrefix  string `json:"model-prefix"`
	Precision    string `json:"precision"`
	Framework    string `json:"framework"`
	Runner       string `json:"runner"`
	SpecDecoding string `json:"spec-decoding"`

	Conc  int   `json:"conc"`
	Concs []int `json:"concs"` // every conc of the row

	Nodes          int `json:"nodes"`
	DedicatedNodes int `json:"dedicated-nodes"`
	GPUs           int `json:"gpus"`
	PrefillGPUs    int `json:"prefill-gpus"`
	DecodeGPUs     int `json:"decode-gpus"`

	Disagg         bool `json:"disagg"`
	PrefillWorkers int  `json:"prefill-workers"`
	PrefillTP      int  `json:"prefill-tp"`
	PrefillEP      int  `json:"prefill-ep"`
	PrefillDPA     bool `json:"prefill-dp-attn"`
	DecodeWorkers  int  `json:"decode-workers"`
	DecodeTP       int  `json:"decode-tp"`
	DecodeEP       int  `json:"decode-ep"`
	DecodeDPA      bool `json:"decode-dp-attn"`
	DraftTokens    int  `json:"draft-tokens"`

	KVOffloading     string `json:"kv-offloading,omitempty"`
	KVOffloadBackend string `json:"kv-offload-backend,omitempty"`
	TotalCPUDRAMGB   int    `json:"total-cpu-dram-gb"`
	KVP2PTransfer    string `json:"kv-p2p-transfer,omitempty"`
	Router           string `json:"router,omitempty"`

	Eval bool `json:"eval"`
	// EvalOnly: the point runs its eval alone, without the throughput
	// benchmark (InferenceX's eval-only rows); its row carries eval-only,
	// so its identity differs from the perf points of the same shape.
	EvalOnly bool `json:"eval-only,omitempty"`

	RecipePath string `json:"recipe"`      // root-relative CONFIG_FILE path
	RecipeFile string `json:"recipe-file"` // absolute path on this machine
	// RecipeDigest is the sha256 of the resolved recipe in the identity
	// (config.Recipe.ResolvedDigest); a worker launches the recipe only
	// when its file still resolves to it.
	RecipeDigest string         `json:"recipe-sha256,omitempty"`
	RecipeSets   []string       `json:"recipe-sets,omitempty"` // --set overrides (Options.RecipeSets)
	Recipe       *config.Recipe `json:"-"`
	Source       strictyaml.Pos `json:"source"` // the search-space entry in the master config

	// ID is the point's ID in a sweep (exp-name plus identity); Identity
	// (deployment hash plus concurrency) keys the ledger, reuse and workflow
	// IDs; DeploymentHash is the shared deployment hash of the row's points.
	ID             string `json:"id"`
	Identity       string `json:"identity"`
	DeploymentHash string `json:"deployment"`
	BaselineKey    string `json:"baseline-key"`
	// BringUpGroup numbers the point's deployment (1, 2, ... in plan
	// order): points with the same number share one allocation and one
	// server bring-up.
	BringUpGroup int `json:"bring-up-group"`
	// Profile is the planned measurement profile; ProfileHash its hash.
	Profile     point.Profile `json:"profile"`
	ProfileHash string        `json:"profile-hash"`
	// SyntheticAL is the golden acceptance length the perf stage injects
	// (0: the engine's real acceptance).
	SyntheticAL float64 `json:"synthetic-al,omitempty"`

	Row         json.RawMessage `json:"row"` // the InferenceX row
	ISL         int             `json:"isl,omitempty"`
	OSL         int             `json:"osl,omitempty"`
	DurationSec int             `json:"duration-sec,omitempty"`
}

// NodeAllocations sums the nodes of every bring-up group: the points of one
// deployment hold one allocation.
func (p *Plan) NodeAllocations() int {
	total := 0
	for _, g := range p.BringUpGroups() {
		total += g.Nodes
	}
	return total
}

// BringUpGroup is one deployment of a plan: its points share one
// allocation and one server bring-up, run their perf one after another and
// restart the server once in eval mode when any of them has an eval.
type BringUpGroup struct {
	Group          int    `json:"group"` // Point.BringUpGroup
	DeploymentHash string `json:"deployment"`
	Topology       string `json:"topology"`
	Nodes          int    `json:"nodes"`
	// Points are indexes into Plan.Points, in plan order.
	Points []int `json:"points"`
	Concs  []int `json:"concs"`
	Evals  int   `json:"evals"`
}

// BringUpGroups groups the points by deployment, in plan order.
func (p *Plan) BringUpGroups() []BringUpGroup {
	var out []BringUpGroup
	at := map[string]int{}
	for i, pt := range p.Points {
		key := pt.DeploymentHash
		if key == "" {
			key = pt.ID // no deployment hash: a deployment of its own
		}
		j, ok := at[key]
		if !ok {
			j = len(out)
			at[key] = j
			out = append(out, BringUpGroup{Group: j + 1, DeploymentHash: pt.DeploymentHash, Topology: pt.Topology})
		}
		g := &out[j]
		g.Nodes = max(g.Nodes, pt.Nodes)
		g.Points = append(g.Points, i)
		g.Concs = append(g.Concs, pt.Conc)
		if pt.Eval {
			g.Evals++
		}
	}
	return out
}

// EvalRestarts counts the eval-mode restarts the plan needs: one per
// bring-up group with an eval.
func (p *Plan) EvalRestarts() int {
	n := 0
	for _, g := range p.BringUpGroups() {
		// An eval-only deployment comes up in eval mode: no restart.
		if g.Evals > 0 && !p.Points[g.Points[0]].EvalOnly {
			n++
		}
	}
	return n
}

// Evals counts the points that run an eval.
func (p *Plan) Evals() int {
	n := 0
	for _, pt := range p.Points {
		if pt.Eval {
			n++
		}
	}
	return n
}

// Build validates everything the sweep names and returns its points.
func Build(opts Options) (*Plan, error) {
	if opts.Sweep == nil {
		return nil, &strictyaml.Error{Field: "sweep", Msg: "no sweep given"}
	}
	if opts.Cluster == nil {
		return nil, &strictyaml.Error{Field: "cluster", Msg: "no cluster profile given"}
	}
	var errs strictyaml.Errors
	seen := map[string]bool{}
	add := func(err error) {
		var list strictyaml.Errors
		switch e := err.(type) {
		case nil:
		case strictyaml.Errors:
			list = e
		case *strictyaml.Error:
			list = strictyaml.Errors{e}
		default:
			list = strictyaml.Errors{{Msg: err.Error()}}
		}
		// Rows of one entry share recipe and shape: say each problem once.
		for _, e := range list {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				errs = append(errs, e)
			}
		}
	}
	s, c := opts.Sweep, opts.Cluster
	master, err := ixconfig.LoadMaster(s.ConfigFiles...)
	add(err)
	var runners *ixconfig.Runners
	if s.RunnerConfig != "" {
		runners, err = ixconfig.LoadRunners(s.RunnerConfig)
		add(err)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	rows, err := matrix.Generate(master, runners, matrix.Options{Keys: s.ConfigKeys})
	if err != nil {
		return nil, err
	}
	// Eval-only candidates are picked before KeepRow drops them.
	var eoCands, eoAllCands []*matrix.Row
	if opts.EvalOnlyRow != nil && s.Evals {
		for _, r := range rows {
			if ok, all := opts.EvalOnlyRow(r); ok && all {
				eoAllCands = append(eoAllCands, r)
			} else if ok {
				eoCands = append(eoCands, r)
			}
		}
	}
	if opts.KeepRow != nil {
		rows = slices.DeleteFunc(rows, func(r *matrix.Row) bool { return !opts.KeepRow(r) })
		if len(rows) == 0 && len(eoCands)+len(eoAllCands) == 0 {
			return nil, &strictyaml.Error{Field: "config-keys", Msg: "the selected scenarios of " + strings.Join(s.ConfigKeys, ", ") + " generate no rows"}
		}
	}
	eoRows := evalOnlyRows(eoCands, eoAllCands)
	// Points are sized and launched from srt-slurm recipes, which only
	// multinode entries name; single-node rows have no recipe to plan from.
	for _, row := range slices.Concat(rows, eoRows) {
		if e := row.Entry; !e.Multinode && !seen["single:"+e.Key] {
			seen["single:"+e.Key] = true
			errs = append(errs, &strictyaml.Error{Pos: e.FieldPos("multinode"), Field: e.Key + ".multinode",
				Msg: "single-node config key: sweep plans cover multinode (srt-slurm recipe) keys only; print its InferenceX matrix rows with --format ix-json instead"})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	evalAt := map[int]int{}
	var evalRows []*matrix.Row
	if s.Evals {
		for _, pick := range matrix.SelectEvals(rows) {
			if opts.KeepEval == nil || opts.KeepEval(rows[pick.Index]) {
				evalAt[pick.Index] = pick.Conc
			}
		}
		for _, r := range matrix.EvalRows(rows) {
			if opts.KeepEval == nil || opts.KeepEval(r) {
				evalRows = append(evalRows, r)
			}
		}
	}

	var golden goldenal.Table
	if s.GoldenAL != "" {
		if golden, err = goldenal.Load(s.GoldenAL); err != nil {
			return nil, err
		}
	}
	if opts.OnePointPerKey {
		rows, evalAt = onePerKey(rows, evalAt)
		eoRows = nil
	}
	root := cmp.Or(opts.RecipesRoot, s.RecipesRoot)
	if root == "" {
		if root, err = overlay.RecipesRoot(c); err != nil {
			return nil, err
		}
	}
	launcher := cmp.Or(opts.LauncherVersion, ClusterLauncher(c))
	p := &Plan{SweepName: s.Name, Cluster: c, RecipesRoot: root, RecipeSets: opts.RecipeSets, LauncherVersion: launcher, Rows: rows, EvalRows: evalRows}
	recipes := map[string]*config.Recipe{}
	src := recipeSource{root: root, sets: opts.RecipeSets}
	src.overlay, _ = overlay.Open(root)
	for i, row := range rows {
		pts, err := points(row, i, evalAt, runners, c, src, launcher, recipes)
		if opts.OnePointPerKey {
			pts = slices.DeleteFunc(pts, func(pt Point) bool { return pt.Conc != slices.Min(pt.Concs) })
		}
		if err != nil {
			add(err)
			continue
		}
		for j := range pts {
			add(measure(&pts[j], s, golden))
		}
		p.Points = append(p.Points, pts...)
	}
	// Eval-only rows: a point per eval concurrency (eval-conc, or every
	// conc under all-evals' eval-all-concs), with no perf stage. Their rows
	// follow the throughput rows.
	for j, row := range eoRows {
		i := len(rows) + j
		pts, err := points(row, i, nil, runners, c, src, launcher, recipes)
		if err != nil {
			add(err)
			continue
		}
		evalConcs := matrix.EvalConcs(row)
		pts = slices.DeleteFunc(pts, func(pt Point) bool { return !slices.Contains(evalConcs, pt.Conc) })
		for j := range pts {
			pts[j].Eval, pts[j].Profile.Eval = true, true
			pts[j].EvalOnly, pts[j].Profile.EvalOnly = true, true
			add(measure(&pts[j], s, golden))
			// As InferenceX's EVAL_ONLY jobs: real draft verification, no
			// synthetic acceptance.
			pts[j].SyntheticAL, pts[j].Profile.GoldenAL = 0, 0
			pts[j].ProfileHash = pts[j].Profile.Hash()
		}
		p.Points = append(p.Points, pts...)
	}
	p.EvalRows = append(p.EvalRows, eoRows...)
	if len(errs) > 0 {
		return nil, errs
	}
	for i := range p.Points {
		p.Points[i].Index = i
	}
	for _, g := range p.BringUpGroups() {
		for _, i := range g.Points {
			p.Points[i].BringUpGroup = g.Group
		}
	}
	if err := checkUnique(p.Points); err != nil {
		return nil, err
	}
	p.Inputs = inputs(s, c, p.Points)
	return p, nil
}

// onePerKey keeps each key's first row holding its lowest concurrency and
// moves the key's eval, if it has one, to that concurrency.
func onePerKey(rows []*matrix.Row, evalAt map[int]int) ([]*matrix.Row, map[int]int) {
	best := map[string]int{} // key -> index of its row
	var keys []string
	for i, r := range rows {
		j, ok := best[r.ConfigKey]
		if !ok {
			keys = append(keys, r.ConfigKey)
		}
		if !ok || slices.Min(r.Conc()) < slices.Min(rows[j].Conc()) {
			best[r.ConfigKey] = i
		}
	}
	hasEval := map[string]bool{}
	for i := range evalAt {
		hasEval[rows[i].ConfigKey] = true
	}
	out, at := make([]*matrix.Row, 0, len(keys)), map[int]int{}
	for _, k := range keys {
		r := rows[best[k]]
		if hasEval[k] {
			at[len(out)] = slices.Min(r.Conc())
		}
		out = append(out, r)
	}
	return out, at
}

// evalOnlyRows annotates the eval-only candidates as InferenceX's
// --evals-only rows: its eval selection of cands, every row of all
// (all-evals), in generation order.
func evalOnlyRows(cands, all []*matrix.Row) []*matrix.Row {
	out := matrix.EvalRows(cands)
	return append(out, matrix.AllEvalRows(all)...)
}

// EvalOnlyPoints counts the points that run an eval without perf.
func (p *Plan) EvalOnlyPoints() int {
	n := 0
	for _, pt := range p.Points {
		if pt.EvalOnly {
			n++
		}
	}
	return n
}

// measure fills in the planned measurement profile: the golden AL the perf
// stage injects and everything else the plan knows about how the point's
// figures are measured.
func measure(pt *Point, s *config.Sweep, golden goldenal.Table) error {
	rowAL, rowHasAL := RowSyntheticAL(pt.Row)
	if rowHasAL {
		pt.SyntheticAL = rowAL
	}
	if golden != nil && pt.SpecDecoding != "" && pt.SpecDecoding != "none" && pt.DraftTokens > 0 {
		al, err := golden.Lookup(pt.Model, s.Thinking, pt.DraftTokens)
		if err != nil {
			return &strictyaml.Error{Pos: pt.Source, Field: "golden-al", Msg: fmt.Sprintf("%s: point %s: %v", strictyaml.DisplayPath(s.GoldenAL), pt.ExpName, err)}
		}
		// A row that pins a different AL than the golden table is stale.
		if rowHasAL && math.Abs(rowAL-al) > 1e-9 {
			return &strictyaml.Error{Pos: pt.Source, Field: "golden-al", Msg: fmt.Sprintf("point %s: SYNTHETIC_ACCEPTANCE_LENGTH=%g in the config but the golden AL for %d draft tokens is %g",
				pt.ExpName, rowAL, pt.DraftTokens, al)}
		}
		pt.SyntheticAL = al
	}
	pt.Profile.GoldenAL = pt.SyntheticAL
	pt.Profile.Thinking = s.Thinking
	pt.ProfileHash = pt.Profile.Hash()
	return nil
}

func inputs(s *config.Sweep, c *config.Cluster, pts []Point) []Input {
	var out []Input
	seen := map[string]bool{}
	add := func(role, path string) {
		if path != "" && !seen[path] {
			seen[path] = true
			out = append(out, Input{Role: role, Path: path})
		}
	}
	add("sweep", s.Path)
	add("cluster", c.Path)
	for _, f := range s.ConfigFiles {
		add("config", f)
	}
	add("runners", s.RunnerConfig)
	add("golden-al", s.GoldenAL)
	for _, pt := range pts {
		add("recipe", pt.RecipeFile)
	}
	return out
}

// checkUnique refuses a plan in which two points share an identity: their
// results would be indistinguishable in the ledger.
func checkUnique(pts []Point) error {
	var errs strictyaml.Errors
	first := map[string]int{}
	ids := map[string]int{}
	for i, pt := range pts {
		if j, dup := first[pt.Identity]; dup {
			errs = append(errs, &strictyaml.Error{Pos: pt.Source, Field: pt.ConfigKey,
				Msg: fmt.Sprintf("duplicate point: %s (conc %d) has the same identity %s as %s (conc %d, %s); the config lists one deployment twice at this concurrency",
					pt.ExpName, pt.Conc, pt.Identity[:12]+"...", pts[j].ExpName, pts[j].Conc, pts[j].Source)})
			continue
		}
		first[pt.Identity] = i
		if j, dup := ids[pt.ID]; dup {
			errs = append(errs, &strictyaml.Error{Pos: pt.Source, Field: pt.ConfigKey,
				Msg: fmt.Sprintf("duplicate point ID %s (also point %d)", pt.ID, j+1)})
			continue
		}
		ids[pt.ID] = i
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// RowSyntheticAL reads SYNTHETIC_ACCEPTANCE_LENGTH from the row's
// additional-settings when SYNTHETIC_ACCEPTANCE=true, as InferenceX's
// launchers export it.
func RowSyntheticAL(row json.RawMessage) (float64, bool) {
	var r struct {
		Prefill struct {
			Settings []string `json:"additional-settings"`
		} `json:"prefill"`
	}
	if json.Unmarshal(row, &r) != nil {
		return 0, false
	}
	on, al := false, 0.0
	for _, s := range r.Prefill.Settings {
		k, v, _ := strings.Cut(s, "=")
		switch k {
		case "SYNTHETIC_ACCEPTANCE":
			on = v == "true"
		case "SYNTHETIC_ACCEPTANCE_LENGTH":
			al, _ = strconv.ParseFloat(v, 64)
		}
	}
	return al, on && al > 0
}

// RecipeRef is the row's CONFIG_FILE value (the srt-slurm recipe it
// launches), or the error a plan of the row reports.
func RecipeRef(row *matrix.Row) (string, error) {
	ref, _, _, err := recipeRef(row)
	return ref, err
}

// recipeRef finds CONFIG_FILE= in the prefill, then the decode settings.
func recipeRef(row *matrix.Row) (string, strictyaml.Pos, string, error) {
	s := row.Search
	var found []struct {
		ref   string
		pos   strictyaml.Pos
		field string
	}
	for _, w := range []*ixconfig.Worker{s.Prefill, s.Decode} {
		if w == nil {
			continue
		}
		for j, set := range w.AdditionalSettings {
			if k, v, ok := cutEq(set); ok && k == "CONFIG_FILE" {
				found = append(found, struct {
					ref   string
					pos   strictyaml.Pos
					field string
				}{v, w.SettingPos[j], fmt.Sprintf("%s.additional-settings[%d]", w.Path, j)})
			}
		}
	}
	if len(found) == 0 {
		return "", s.Pos, "", &strictyaml.Error{Pos: s.Pos, Field: s.Path + ".prefill.additional-settings",
			Msg: "no CONFIG_FILE=<recipe> entry; sweepflow needs the srt-slurm recipe to size and launch this row"}
	}
	for _, f := range found[1:] {
		if f.ref != found[0].ref {
			return "", f.pos, f.field, &strictyaml.Error{Pos: f.pos, Field: f.field,
				Msg: fmt.Sprintf("CONFIG_FILE=%s disagrees with CONFIG_FILE=%s given earlier", f.ref, found[0].ref)}
		}
	}
	return found[0].ref, found[0].pos, found[0].field, nil
}

func cutEq(s string) (string, string, bool) {
	k, v, ok := strings.Cut(s, "=")
	return strings.TrimSpace(k), strings.TrimSpace(v), ok
}

// recipeSource is where a plan's recipes come from: the recipes root and,
// when it was composed from the user's checkouts, what it was composed of.
type recipeSource struct {
	root    string
	overlay *overlay.Root
	sets    []string // --set overrides applied to every recipe
}

func points(row *matrix.Row, rowIndex int, evalAt map[int]int, runners *ixconfig.Runners, c *config.Cluster,
	src recipeSource, launcher string, recipes map[string]*config.Recipe) ([]Point, error) {
	e, s := row.Entry, row.Search
	runner, _ := row.Fields.Get("runner")
	runnerName, _ := runner.(string)
	if !c.ServesRunner(runnerName) {
		return nil, &strictyaml.Error{Pos: e.FieldPos("runner"), Field: e.Key + ".runner",
			Msg: fmt.Sprintf("runner %q is not served by cluster %s (it serves %v)", runnerName, c.Name, c.Runners)}
	}
	// What InferenceX's launcher for the runner does with this row.
	ixLauncher, lane := overlay.LauncherOf(runnerName, runners), overlay.LaneOf(row)
	if err := overlay.Launches(ixLauncher, lane); err != nil {
		return nil, &strictyaml.Error{Pos: e.FieldPos("framework"), Field: e.Key + ".framework", Msg: err.Error()}
	}
	ref, refPos, refField, err := recipeRef(row)
	if err != nil {
		return nil, err
	}
	root := src.root
	if root == "" {
		return nil, &strictyaml.Error{Pos: refPos, Field: refField,
			Msg: "no recipes root: set recipes-root in the sweep file or the cluster profile, or pass --recipes-root or --inferencex"}
	}
	if src.overlay != nil {
		if err := src.overlay.Check(ixLauncher, lane, ref); err != nil {
			return nil, &strictyaml.Error{Pos: refPos, Field: refField, Msg: err.Error()}
		}
	}
	recipe := recipes[ref]
	if recipe == nil {
		recipe, err = config.LoadRecipe(root, ref, src.sets...)
		if err != nil {
			// Problems inside the recipe carry the recipe's own file:line;
			// a missing or unreadable recipe is reported where it is named.
			if ce, ok := err.(*strictyaml.Error); ok && ce.Pos.File == "" {
				return nil, &strictyaml.Error{Pos: refPos, Field: refField, Msg: ce.Msg}
			}
			return nil, err
		}
		recipes[ref] = recipe
	}

	gpn := c.GPUsPerNode
	if runners != nil {
		if hw := runners.Hardware[e.Runner]; hw != nil {
			if hw.GPUsPerNode != c.GPUsPerNode {
				return nil, &strictyaml.Error{Pos: e.FieldPos("runner"), Field: e.Key + ".runner",
					Msg: fmt.Sprintf("runner %s has %d GPUs per node but cluster %s has %d", e.Runner, hw.GPUsPerNode, c.Name, c.GPUsPerNode)}
			}
			gpn = hw.GPUsPerNode
		}
	}
	fp, err := recipe.Footprint(gpn)
	if err != nil {
		return nil, err
	}
	if err := crossCheck(row, recipe); err != nil {
		return nil, err
	}
	topo := Topology(s.Prefill, s.Decode)
	if fp.Nodes > c.Nodes {
		return nil, &strictyaml.Error{Pos: s.Pos, Field: s.Path,
			Msg: fmt.Sprintf("%s needs %d nodes (recipe %s), cluster %s has only %d; it can never run there", topo, fp.Nodes, recipe.Path, c.Name, c.Nodes)}
	}

	rowJSON, err := row.MarshalJSON()
	if err != nil {
		return nil, err
	}
	base := Point{
		RowIndex:     rowIndex,
		Scenario:     row.Scenario,
		ConfigKey:    row.ConfigKey,
		ExpName:      row.ExpName(),
		Topology:     topo,
		Image:        e.Image,
		Model:        e.Model,
		ModelPrefix:  e.ModelPrefix,
		Precision:    e.Precision,
		Framework:    e.Framework,
		Runner:       runnerName,
		SpecDecoding: s.SpecDecoding,
		Concs:        row.Conc(),

		Nodes:          fp.Nodes,
		DedicatedNodes: fp.DedicatedNodes,
		GPUs:           fp.GPUs,
		PrefillGPUs:    fp.PrefillGPUs,
		DecodeGPUs:     fp.DecodeGPUs,

		Disagg:         s.Decode.NumWorker > 0,
		PrefillWorkers: s.Prefill.NumWorker,
		PrefillTP:      s.Prefill.TP,
		PrefillEP:      s.Prefill.EP,
		PrefillDPA:     s.Prefill.DPAttn,
		DecodeWorkers:  s.Decode.NumWorker,
		DecodeTP:       s.Decode.TP,
		DecodeEP:       s.Decode.EP,
		DecodeDPA:      s.Decode.DPAttn,
		DraftTokens:    recipe.DraftTokens(),

		TotalCPUDRAMGB: row.Int("total-cpu-dram-gb"),

		RecipePath:   recipe.Path,
		RecipeFile:   recipe.File,
		RecipeDigest: recipe.ResolvedDigest(),
		RecipeSets:   recipe.Sets,
		Recipe:       recipe,
		Source:       s.Pos,
		Row:          rowJSON,
		ISL:          row.Int("isl"),
		OSL:          row.Int("osl"),
		DurationSec:  row.Int("duration"),
	}
	dep := DeploymentOf(row, recipe, launcher, c.Backend)
	base.DeploymentHash = dep.Hash()
	base.Profile = point.Profile{Scenario: row.Scenario, ISL: base.ISL, OSL: base.OSL, DurationSec: base.DurationSec,
		Backend: c.Backend, Launcher: c.Launcher}
	if row.Scenario == matrix.AgenticCoding {
		base.KVOffloading = s.KVOffloading
		if base.KVOffloading == "" {
			base.KVOffloading = "none"
		}
		if s.KVOffloadBackend != nil {
			base.KVOffloadBackend = s.KVOffloadBackend.Name
		}
	}
	if v, ok := row.Fields.Get("kv-p2p-transfer"); ok {
		base.KVP2PTransfer, _ = v.(string)
	}
	if v, ok := row.Fields.Get("router"); ok {
		if o, ok := v.(matrix.Object); ok {
			name, _ := o.Get("name")
			version, _ := o.Get("version")
			base.Router = fmt.Sprintf("%v %v", name, version)
		}
	}
	evalConc, hasEval := evalAt[rowIndex]
	var out []Point
	for _, conc := range base.Concs {
		pt := base
		pt.Conc = conc
		pt.Eval = hasEval && conc == evalConc
		id := point.Identity{DeploymentHash: base.DeploymentHash, Conc: conc}
		pt.Identity, pt.ID = id.String(), point.ID(pt.ExpName, id)
		pt.BaselineKey = point.BaselineKey(dep, conc)
		pt.Profile.Eval = pt.Eval
		out = append(out, pt)
	}
	return out, nil
}

// crossCheck makes sure the recipe deploys what the config entry says: the
// same shape (aggregated or not) and worker counts. GPUs per worker are not
// compared: InferenceX's launcher runs the recipe whatever the row's tp
// says, so the allocation is the recipe's (fp) and `starter check` reports
// the disagreement (checklist rule recipe-row).
func crossCheck(row *matrix.Row, r *config.Recipe) error {
	s := row.Search
	// field is ".prefill.<key>" or ".decode.<key>": point at that line.
	fail := func(field, format string, args ...any) error {
		pos := s.Pos
		role, key, _ := strings.Cut(strings.TrimPrefix(field, "."), ".")
		if w := map[string]*ixconfig.Worker{"prefill": s.Prefill, "decode": s.Decode}[role]; w != nil {
			pos = w.FieldPos(key)
		}
		return &strictyaml.Error{Pos: pos, Field: s.Path + field, Msg: fmt.Sprintf(format, args...)}
	}
	res := r.Resources
	if !res.Disaggregated {
		if s.Decode.NumWorker != 0 {
			return fail(".decode.num-worker", "is %d but recipe %s is aggregated (agg_nodes); aggregated entries use decode num-worker 0", s.Decode.NumWorker, r.Path)
		}
		workers := r.Roles.Agg.NumWorkers()
		if s.Prefill.NumWorker != workers {
			return fail(".prefill.num-worker", "is %d but recipe %s runs %d aggregated worker(s)", s.Prefill.NumWorker, r.Path, workers)
		}
		return nil
	}
	if s.Decode.NumWorker == 0 {
		return fail(".decode.num-worker", "is 0 (aggregated) but recipe %s is disaggregated", r.Path)
	}
	if p := r.Roles.Prefill.Workers; s.Prefill.NumWorker != p {
		return fail(".prefill.num-worker", "is %d but recipe %s runs %d prefill worker(s)", s.Prefill.NumWorker, r.Path, p)
	}
	if d := r.Roles.Decode.Workers; s.Decode.NumWorker != d {
		return fail(".decode.num-worker", "is %d but recipe %s runs %d decode worker(s)", s.Decode.NumWorker, r.Path, d)
	}
	return nil
}

// Topology renders a deployment for humans: "TP8 agg", "1P1D DEP8/DEP16".
func Topology(prefill, decode *ixconfig.Worker) string {
	if decode == nil || decode.NumWorker == 0 {
		prefix := ""
		if prefill.NumWorker > 1 {
			prefix = fmt.Sprintf("%dx", prefill.NumWorker)
		}
		return prefix + workerLabel(prefill) + " agg"
	}
	return fmt.Sprintf("%dP%dD %s/%s", prefill.NumWorker, decode.NumWorker, workerLabel(prefill), workerLabel(decode))
}

func workerLabel(w *ixconfig.Worker) string {
	var s string
	switch {
	case w.DPAttn && w.EP == w.TP:
		s = fmt.Sprintf("DEP%d", w.TP)
	case w.DPAttn:
		s = fmt.Sprintf("TP%d/EP%d/DPA", w.TP, w.EP)
	case w.EP > 1 && w.EP == w.TP:
		s = fmt.Sprintf("TEP%d", w.TP)
	case w.EP > 1:
		s = fmt.Sprintf("TP%d/EP%d", w.TP, w.EP)
	default:
		s = fmt.Sprintf("TP%d", w.TP)
	}
	if w.PP > 1 {
		s += fmt.Sprintf("/PP%d", w.PP)
	}
	if w.PCPSize > 1 {
		s += fmt.Sprintf("/PCP%d", w.PCPSize)
	}
	return s
}

// DeploymentOf is the deployment a row launches: the canonical row minus
// conc and exp-name, the recipe's root-relative path and resolved form,
// image, model, launcher version and backend kind (see point.Deployment).
func DeploymentOf(row *matrix.Row, r *config.Recipe, launcherVersion, backend string) point.Deployment {
	ref := r.Path
	if r.Selector != "" {
		ref += ":" + r.Selector
	}
	return point.Deployment{
		Row:         matrix.Canonical(row.Fields.Without("conc", "exp-name")),
		BaselineRow: matrix.Canonical(row.Fields.Without("conc", "exp-name", "image")),
		RecipeRef:   ref, Recipe: r.Canonical(),
		Image: row.Entry.Image, Model: row.Entry.Model,
		Launcher: launcherVersion, Backend: backend,
	}
}
