package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Recipe is an srt-slurm recipe named by CONFIG_FILE=, resolved into one
// typed value whichever schema spells it (see recipe_model.go): the launcher
// renders from the typed fields, and Canonical is what identifies it.
type Recipe struct {
	Ref      string // as written after CONFIG_FILE=, e.g. recipes/x.yaml:zip_override_a[1]
	Path     string // root-relative, slash-separated, e.g. recipes/x.yaml
	Selector string // override selector after ':' ("" for a plain recipe)
	File     string // absolute path on this machine (never hashed)
	Display  string // path for messages
	// Sets are --set dotted.key=value overrides, applied in order to the
	// picked variant before it is decoded.
	Sets []string

	Raw    []byte // file bytes, verbatim
	Schema int    // the spelling: SchemaV1 or SchemaV2

	Name        string
	Model       RecipeModel
	Identity    *Map // identity: what should be running (provenance)
	Resources   Resources
	Roles       Roles
	Engine      Engine
	Services    Services
	Frontend    Frontend
	Benchmark   Benchmark
	Dynamo      Dynamo
	HealthCheck HealthCheck
	Slurm       Slurm
	// Telemetry is DCGM power telemetry; nil when the recipe enables none.
	Telemetry *Telemetry
	// Environment is the top-level environment every worker gets after its
	// role's; SrunOptions apply to workers and the benchmark.
	Environment      *Map
	SrunOptions      *Map
	SbatchDirectives *Map
	ExtraMounts      []string // host:container
	SetupScript      string
	EnableConfigDump bool
	// Sections srt-slurm accepts that sweepflow launches nothing from; a
	// launcher refuses the ones that are on.
	ContainerMounts, Profiling, Observability, Output, Reporting Section

	// Warnings are what the recipe means differently from how it reads:
	// a key written twice in one mapping, of which srt-slurm (PyYAML)
	// silently launches the last value, as sweepflow does too.
	Warnings []strictyaml.Error

	doc       *yaml.Node // the recipe mapping after the selector and Sets (Scalars walks it)
	telemetry *Map       // the telemetry section as written (the resolved recipe hashes it)
}

// RecipeModel is the recipe's model section.
type RecipeModel struct {
	Path      string // alias (resolved through the cluster's models) or absolute path
	Container string
	Precision string
}

// Resources is srt-slurm's resources section: the cluster facts (the
// per-role counts live in Roles).
type Resources struct {
	Pos                  strictyaml.Pos
	GPUType              string
	GPUsPerNode          int // 0: not given
	SpreadWorkers        bool
	HetJobs              *bool // nil: the cluster's default
	PackMultinodeWorkers bool
	Disaggregated        bool // prefill/decode roles rather than agg
}

// HealthCheck is srt-slurm's health_check section (defaults 180 x 10 s).
type HealthCheck struct {
	// Pos is where the budget is written: the health_check section, or
	// the recipe's first line when it takes the defaults.
	Pos             strictyaml.Pos
	MaxAttempts     int
	IntervalSeconds int
}

// Timeout is how long the server may take to become healthy.
func (h HealthCheck) Timeout() time.Duration {
	return time.Duration(h.MaxAttempts) * time.Duration(h.IntervalSeconds) * time.Second
}

// Slurm is srt-slurm's slurm section.
type Slurm struct {
	TimeLimit string
	Account   string
	Partition string
}

var selectorRe = regexp.MustCompile(`^zip_override_[\w-]+\[(\d+)\]$`)

// SplitRecipeRef splits a CONFIG_FILE value into its path and selector.
func SplitRecipeRef(ref string) (p, selector string) {
	p, selector, _ = strings.Cut(strings.TrimSpace(ref), ":")
	return p, selector
}

// LoadRecipe reads the recipe ref (a CONFIG_FILE value) under root and
// applies sets (--set dotted.key=value) to it.
func LoadRecipe(root, ref string, sets ...string) (*Recipe, error) {
	file, clean, selector, err := recipeFile(root, ref)
	if err != nil {
		return nil, err
	}
	data, err := readRecipe(root, clean, file)
	if err != nil {
		return nil, err
	}
	return parseRecipeAt(ref, clean, file, selector, data, sets...)
}

// recipeFile resolves a CONFIG_FILE value to its file under root, refusing
// a path that leaves it.
func recipeFile(root, ref string) (file, clean, selector string, err error) {
	rel, selector := SplitRecipeRef(ref)
	clean = path.Clean(filepath.ToSlash(rel))
	if rel == "" || !filepath.IsLocal(filepath.FromSlash(clean)) {
		return "", "", "", &strictyaml.Error{Msg: fmt.Sprintf("recipe path %q must be relative to the recipes root and stay inside it", rel)}
	}
	file, err = filepath.Abs(filepath.Join(root, filepath.FromSlash(clean)))
	if err != nil {
		return "", "", "", &strictyaml.Error{Msg: err.Error()}
	}
	return file, clean, selector, nil
}

// ErrRecipeMissing is what LoadPlannedRecipe wraps when the recipe file is
// not under the root at all (a backend that launches no recipe may ignore it).
var ErrRecipeMissing = errors.New("recipe file missing")

// missingRecipe is a not-found recipe: a config Error that also matches
// ErrRecipeMissing.
type missingRecipe struct{ err *strictyaml.Error }

func (m missingRecipe) Error() string { return m.err.Error() }
func (m missingRecipe) Unwrap() error { return ErrRecipeMissing }

func readRecipe(root, clean, file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &strictyaml.Error{Msg: fmt.Sprintf("recipe %s not found under recipes root %s", clean, strictyaml.DisplayPath(root))}
		}
		return nil, &strictyaml.Error{Msg: "cannot read recipe: " + strictyaml.CleanIOError(err)}
	}
	return data, nil
}

func parseRecipeAt(ref, clean, file, selector string, data []byte, sets ...string) (*Recipe, error) {
	r, err := ParseRecipe(strictyaml.DisplayPath(file), data, selector, sets...)
	if err != nil {
		return nil, err
	}
	r.Ref, r.Path, r.File = strings.TrimSpace(ref), clean, file
	return r, nil
}

// ParseRecipe validates recipe bytes and resolves them into the typed
// recipe: selector picks an override variant, and sets (--set
// dotted.key=value) are applied to it, in order, before it is decoded.
func ParseRecipe(display string, data []byte, selector string, sets ...string) (*Recipe, error) {
	var errs strictyaml.Errors
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	// srt-slurm reads recipes with PyYAML: merge keys expand and a
	// duplicated key keeps its last value; the duplicate is worth a warning.
	root, dups, err := strictyaml.ResolvePyYAML(root)
	if err != nil {
		if e, ok := err.(*strictyaml.Error); ok {
			e.Pos.File = display
		}
		return nil, err
	}
	var warnings []strictyaml.Error
	seen := map[int]bool{}
	for _, d := range dups {
		if seen[d.Line] {
			continue
		}
		seen[d.Line] = true
		warnings = append(warnings, strictyaml.Error{Pos: strictyaml.Pos{File: display, Line: d.Line}, Field: d.Field(),
			Msg: fmt.Sprintf("duplicate key (first defined on line %d); srt-slurm's YAML loader keeps this later value, so it is the one launched", d.FirstLine)})
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	r := &Recipe{Display: display, Raw: data, Selector: selector, Sets: sets, Warnings: warnings}
	if r.Schema, err = d.recipeSchema(root); err != nil {
		return nil, err
	}
	doc, err := d.applySelector(root, selector)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errs.Err()
	}
	if len(sets) > 0 {
		if doc, err = applySets(doc, sets); err != nil {
			return nil, err
		}
	}
	r.doc = doc
	(&recipeDecoder{decoder: d}).decodeRecipe(r, doc)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// Footprint is what one deployment of a recipe occupies.
type Footprint struct {
	Nodes          int // allocated nodes, dedicated ones included
	DedicatedNodes int // etcd/NATS, frontend and client nodes
	PrefillGPUs    int // GPUs running prefill workers (aggregated: all engine GPUs)
	DecodeGPUs     int // GPUs running decode workers (0 when aggregated)
	GPUs           int // engine GPUs = PrefillGPUs + DecodeGPUs
	GPUsPerPrefill int // per worker (aggregated: per agg worker)
	GPUsPerDecode  int
}

// Footprint computes nodes and GPUs as srt-slurm allocates them: worker
// nodes from the roles, plus the nodes of dedicated roles (etcd/NATS,
// frontend, benchmark client): one shared node when the benchmark is
// colocated with the frontend (srt-slurm's default), else one each
// (submit.py). gpusPerNode is used when the recipe does not say; when both
// do they must agree.
func (r *Recipe) Footprint(gpusPerNode int) (Footprint, error) {
	res := r.Resources
	gpn := res.GPUsPerNode
	if gpn == 0 {
		gpn = gpusPerNode
	}
	field := func(role, k string) string {
		if r.Schema >= SchemaV2 {
			return "roles." + role + "." + k
		}
		switch k {
		case "gpus":
			return "resources.gpus_per_" + role
		case "":
			return "resources"
		}
		return "resources." + role + "_" + k
	}
	fail := func(pos strictyaml.Pos, f, format string, args ...any) (Footprint, error) {
		if pos.File == "" {
			pos = res.Pos
		}
		if pos.File == "" {
			pos = strictyaml.Pos{File: r.Display}
		}
		return Footprint{}, &strictyaml.Error{Pos: pos, Field: f, Msg: fmt.Sprintf(format, args...)}
	}
	if gpn <= 0 {
		return fail(res.Pos, "resources.gpus_per_node", "unknown: set it in the recipe or in the runner's hardware entry")
	}
	// A recipe may use part of each node (srt-slurm asks sbatch for
	// --gpus-per-node=<recipe's>, and places workers on GPUs 0..n-1), but
	// never more GPUs than a node has.
	if res.GPUsPerNode != 0 && gpusPerNode != 0 && res.GPUsPerNode > gpusPerNode {
		return fail(res.Pos, "resources.gpus_per_node", "recipe says %d GPUs per node but the runner hardware has only %d", res.GPUsPerNode, gpusPerNode)
	}
	// perWorker is a role's GPUs per worker; a colocated decode role shares
	// the prefill nodes and must say its GPUs.
	perWorker := func(ro *Role, workers int) (int, error) {
		if workers <= 0 {
			_, err := fail(ro.Pos, field(ro.Name, "workers"), "must be > 0, got %d", workers)
			return 0, err
		}
		if ro.GPUs > 0 {
			if ro.Nodes > 0 && workers*ro.GPUs > ro.Nodes*gpn {
				_, err := fail(ro.Pos, field(ro.Name, "gpus"), "%d workers x %d GPUs do not fit on %d nodes x %d GPUs", workers, ro.GPUs, ro.Nodes, gpn)
				return 0, err
			}
			return ro.GPUs, nil
		}
		if ro.Nodes <= 0 || (ro.Nodes*gpn)%workers != 0 {
			_, err := fail(ro.Pos, field(ro.Name, "nodes"), "%d nodes x %d GPUs cannot be split evenly over %d workers; set %s", ro.Nodes, gpn, workers, field(ro.Name, "gpus"))
			return 0, err
		}
		return ro.Nodes * gpn / workers, nil
	}
	var f Footprint
	if res.Disaggregated {
		p, dc := r.Roles.Prefill, r.Roles.Decode
		if p == nil || dc == nil {
			return fail(res.Pos, field(RoleDecode, ""), "a disaggregated recipe needs prefill and decode roles")
		}
		pg, err := perWorker(p, p.Workers)
		if err != nil {
			return Footprint{}, err
		}
		dg, err := perWorker(dc, dc.Workers)
		if err != nil {
			return Footprint{}, err
		}
		f.GPUsPerPrefill, f.GPUsPerDecode = pg, dg
		f.PrefillGPUs, f.DecodeGPUs = pg*p.Workers, dg*dc.Workers
		f.Nodes = p.Nodes + dc.Nodes
	} else {
		a := r.Roles.Agg
		if a == nil {
			return fail(res.Pos, field(RoleAgg, ""), "the recipe has no workers")
		}
		workers := a.NumWorkers()
		g, err := perWorker(a, workers)
		if err != nil {
			return Footprint{}, err
		}
		f.GPUsPerPrefill = g
		f.PrefillGPUs = g * workers
		f.Nodes = a.Nodes
	}
	if f.Nodes <= 0 {
		return fail(res.Pos, field(RolePrefill, "nodes"), "the recipe allocates no nodes")
	}
	dedicated := 0
	for _, on := range []bool{r.Services.InfraDedicated(), r.Frontend.Placement == NodeDedicated, r.Benchmark.Placement == NodeDedicated} {
		if on {
			dedicated++
		}
	}
	if dedicated > 0 && r.Benchmark.ColocateWithFrontend {
		dedicated = 1 // the dedicated roles share one reserved node
	}
	f.DedicatedNodes = dedicated
	f.Nodes += f.DedicatedNodes
	f.GPUs = f.PrefillGPUs + f.DecodeGPUs
	return f, nil
}

// DraftTokens is the speculative draft length (speculative-num-draft-tokens)
// of the role that decodes (decode, else agg), else of prefill; 0 without.
func (r *Recipe) DraftTokens() int {
	for _, ro := range []*Role{r.Roles.Decode, r.Roles.Agg, r.Roles.Prefill} {
		if ro == nil {
			continue
		}
		if v, ok := ro.Args.Get("speculative-num-draft-tokens"); ok {
			if n, ok := v.(int64); ok && n != 0 {
				return int(n)
			}
		}
	}
	return 0
}

// applySelector resolves srt-slurm's override formats: a file with `base:`
// plus `override_<n>` (deep-merged) and `zip_override_<n>` (list leaves
// zipped) sections, picked by "override_<n>", "zip_override_<n>[i]" or "base".
func (d *decoder) applySelector(root *yaml.Node, selector string) (*yaml.Node, error) {
	m := d.Mapping(root, "", nil)
	if m == nil {
		return nil, nil
	}
	if !m.Has("base") {
		if selector != "" {
			return nil, &strictyaml.Error{Pos: d.Pos(root), Field: "base", Msg: fmt.Sprintf("selector %q given but the recipe has no base/override sections", selector)}
		}
		return m.Node, nil
	}
	if selector == "" {
		// srtctl apply submits every override_* and zip_override_* variant
		// (base excluded), one job each. One variant is one deployment, as
		// a matrix row is; several cannot be one row.
		variants, err := d.variants(m)
		if err != nil {
			return nil, err
		}
		switch len(variants) {
		case 1:
			return d.applySelector(root, variants[0])
		case 0:
			return nil, &strictyaml.Error{Pos: d.Pos(root), Field: "base", Msg: "override-format recipe with no override_* or zip_override_* variant: srtctl apply would submit nothing; pick the base with CONFIG_FILE=FILE:base"}
		}
		return nil, &strictyaml.Error{Pos: d.Pos(root), Field: "base", Msg: fmt.Sprintf(
			"override-format recipe named without a variant: srtctl apply would submit all %d (%s), one job each, but a matrix row is one deployment; pick one with CONFIG_FILE=FILE:<variant> (FILE:override_<name>, FILE:zip_override_<name>[i] or FILE:base)",
			len(variants), strings.Join(variants, ", "))}
	}
	base := strictyaml.Deref(m.Values["base"])
	if base.Kind != yaml.MappingNode {
		return nil, &strictyaml.Error{Pos: d.Pos(base), Field: "base", Msg: "expected a mapping, got " + strictyaml.KindName(base)}
	}
	baseName := ""
	if n := mapGet(base, "name"); n != nil {
		baseName = n.Value
	}
	switch {
	case selector == "base":
		return base, nil
	case selectorRe.MatchString(selector):
		key, idxStr, _ := strings.Cut(selector, "[")
		var i int
		fmt.Sscanf(strings.TrimSuffix(idxStr, "]"), "%d", &i)
		z := m.Get(key)
		if z == nil {
			return nil, &strictyaml.Error{Pos: d.Pos(root), Field: key, Msg: fmt.Sprintf("zip group not found in recipe (selector %q)", selector)}
		}
		z = strictyaml.Deref(z)
		if z.Kind != yaml.MappingNode {
			return nil, &strictyaml.Error{Pos: d.Pos(z), Field: key, Msg: "expected a mapping, got " + strictyaml.KindName(z)}
		}
		n, err := zipLength(z)
		if err != nil {
			return nil, &strictyaml.Error{Pos: d.Pos(z), Field: key, Msg: err.Error()}
		}
		if i >= n {
			return nil, &strictyaml.Error{Pos: d.Pos(z), Field: key, Msg: fmt.Sprintf("index [%d] out of range (has %d variants)", i, n)}
		}
		merged := mergeNodes(base, zipSlice(z, i))
		if names := mapGet(z, "name"); names == nil || strictyaml.Deref(names).Kind != yaml.SequenceNode {
			setName(merged, fmt.Sprintf("%s_%s_%d", baseName, strings.TrimPrefix(key, "zip_override_"), i))
		}
		return merged, nil
	case strings.HasPrefix(selector, "override_"):
		o := m.Get(selector)
		if o == nil {
			return nil, &strictyaml.Error{Pos: d.Pos(root), Field: selector, Msg: "override not found in recipe"}
		}
		o = strictyaml.Deref(o)
		if o.Kind != yaml.MappingNode {
			return nil, &strictyaml.Error{Pos: d.Pos(o), Field: selector, Msg: "expected a mapping, got " + strictyaml.KindName(o)}
		}
		merged := mergeNodes(base, o)
		if mapGet(o, "name") == nil {
			setName(merged, baseName+"_"+strings.TrimPrefix(selector, "override_"))
		}
		return merged, nil
	}
	return nil, &strictyaml.Error{Pos: d.Pos(root), Field: "base", Msg: fmt.Sprintf("unsupported selector %q (expected base, override_<name> or zip_override_<name>[i])", selector)}
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	m = strictyaml.Deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if strictyaml.Deref(m.Content[i]).Value == key {
			return strictyaml.Deref(m.Content[i+1])
		}
	}
	return nil
}

func setName(m *yaml.Node, name string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "name" {
			m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name, Line: m.Content[i+1].Line}
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name})
}

// mergeNodes deep-merges override into a copy of base: mappings merge, a null
// deletes the key, anything else replaces (lists are not appended).
func mergeNodes(base, override *yaml.Node) *yaml.Node {
	base, override = strictyaml.Deref(base), strictyaml.Deref(override)
	if base == nil || override == nil || base.Kind != yaml.MappingNode || override.Kind != yaml.MappingNode {
		return override
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: base.Tag, Line: base.Line, Column: base.Column}
	out.Content = append(out.Content, base.Content...)
	for i := 0; i+1 < len(override.Content); i += 2 {
		k, v := strictyaml.Deref(override.Content[i]), strictyaml.Deref(override.Content[i+1])
		pos := -1
		for j := 0; j+1 < len(out.Content); j += 2 {
			if strictyaml.Deref(out.Content[j]).Value == k.Value {
				pos = j
				break
			}
		}
		switch {
		case strictyaml.IsNull(v):
			if pos >= 0 {
				out.Content = append(out.Content[:pos:pos], out.Content[pos+2:]...)
			}
		case pos >= 0:
			out.Content[pos+1] = mergeNodes(out.Content[pos+1], v)
		default:
			out.Content = append(out.Content, k, v)
		}
	}
	return out
}

func zipLength(z *yaml.Node) (int, error) {
	var lengths []int
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if depth > 64 {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := strictyaml.Deref(n.Content[i+1])
			switch v.Kind {
			case yaml.SequenceNode:
				lengths = append(lengths, len(v.Content))
			case yaml.MappingNode:
				walk(v, depth+1)
			}
		}
	}
	walk(z, 0)
	if len(lengths) == 0 {
		return 0, errors.New("zip_override section contains no list values; nothing to zip")
	}
	n := 1
	for _, l := range lengths {
		switch {
		case l == 0:
			return 0, errors.New("zip_override contains an empty list")
		case l == 1:
		case n == 1:
			n = l
		case l != n:
			return 0, fmt.Errorf("incompatible zip lengths %d and %d; lists must have equal length or length 1", n, l)
		}
	}
	return n, nil
}

// zipSlice replaces every list leaf with its i-th element (length-1 lists
// broadcast).
func zipSlice(z *yaml.Node, i int) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: z.Tag, Line: z.Line, Column: z.Column}
	for j := 0; j+1 < len(z.Content); j += 2 {
		k, v := z.Content[j], strictyaml.Deref(z.Content[j+1])
		switch v.Kind {
		case yaml.SequenceNode:
			if len(v.Content) == 1 {
				v = v.Content[0]
			} else if i < len(v.Content) {
				v = v.Content[i]
			}
		case yaml.MappingNode:
			v = zipSlice(v, i)
		}
		out.Content = append(out.Content, k, v)
	}
	return out
}

var slurmTimeRe = regexp.MustCompile(`^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$`)

// ParseSlurmTime parses Slurm time limits ("MM", "MM:SS", "HH:MM:SS",
// "D-HH", "D-HH:MM", "D-HH:MM:SS") and Go durations ("6h").
func ParseSlurmTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil && strings.ContainsAny(s, "hms") {
		if d <= 0 {
			return 0, fmt.Errorf("time limit must be positive, got %q", s)
		}
		return d, nil
	}
	m := slurmTimeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("expected a Slurm time limit like 6:00:00 or a duration like 6h, got %q", s)
	}
	var n [4]int64
	for i := range n {
		if m[i+1] != "" {
			if _, err := fmt.Sscanf(m[i+1], "%d", &n[i]); err != nil || n[i] > 1<<20 {
				return 0, fmt.Errorf("time limit %q is out of range", s)
			}
		}
	}
	days, a, b, c := n[0], n[1], n[2], n[3]
	var d time.Duration
	switch {
	case m[1] != "": // D-HH[:MM[:SS]]
		d = time.Duration(days)*24*time.Hour + time.Duration(a)*time.Hour + time.Duration(b)*time.Minute + time.Duration(c)*time.Second
	case m[4] != "": // HH:MM:SS
		d = time.Duration(a)*time.Hour + time.Duration(b)*time.Minute + time.Duration(c)*time.Second
	case m[3] != "": // MM:SS
		d = time.Duration(a)*time.Minute + time.Duration(b)*time.Second
	default: // MM
		d = time.Duration(a) * time.Minute
	}
	if d <= 0 {
		return 0, fmt.Errorf("time limit must be positive, got %q", s)
	}
	return d, nil
}

// RecipeDigest is the sha256 (hex) of a recipe file's bytes: what points
// planned before recipes were identified by their resolved form carry.
func RecipeDigest(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// LoadPlannedRecipe loads the recipe a planned point names, for launching:
// the file must stay inside root after symbolic links are resolved, and it
// must resolve (with the point's --set overrides) to the recipe the point's
// identity was computed from (digest, a Recipe.ResolvedDigest; a point
// planned by an older starter carries the file's RecipeDigest, and then
// the bytes must match). A worker launches nothing else, so neither a path
// from workflow input nor a file edited after planning reaches a cluster.
func LoadPlannedRecipe(root, ref, digest string, sets ...string) (*Recipe, error) {
	data, file, clean, selector, err := plannedRecipeBytes(root, ref, digest)
	if err != nil {
		return nil, err
	}
	r, perr := parseRecipeAt(ref, clean, file, selector, data, sets...)
	if digest == RecipeDigest(data) {
		return r, perr
	}
	if perr != nil {
		return nil, &strictyaml.Error{Msg: fmt.Sprintf("recipe %s under %s changed since the point was planned and no longer loads (%v); plan the sweep again",
			clean, strictyaml.DisplayPath(root), perr)}
	}
	if got := r.ResolvedDigest(); got != digest {
		return nil, &strictyaml.Error{Msg: fmt.Sprintf("recipe %s under %s resolves to sha256 %.12s, but the point was planned from sha256 %.12s: the file changed since planning, so it is not the deployment the point identity names; plan the sweep again",
			clean, strictyaml.DisplayPath(root), got, digest)}
	}
	return r, nil
}

// VerifyPlannedRecipe is LoadPlannedRecipe's check, for a worker that
// launches from the file later (or not at all).
func VerifyPlannedRecipe(root, ref, digest string, sets ...string) error {
	_, err := LoadPlannedRecipe(root, ref, digest, sets...)
	return err
}

func plannedRecipeBytes(root, ref, digest string) (data []byte, file, clean, selector string, err error) {
	if root == "" {
		return nil, "", "", "", &strictyaml.Error{Msg: fmt.Sprintf("recipe %s: the cluster profile has no recipes-root to launch it from", ref)}
	}
	if digest == "" {
		return nil, "", "", "", &strictyaml.Error{Msg: fmt.Sprintf("recipe %s: the point carries no recipe digest (planned by an older starter); plan the sweep again", ref)}
	}
	if file, clean, selector, err = recipeFile(root, ref); err != nil {
		return nil, "", "", "", err
	}
	absRoot, err := filepath.Abs(root) // file is absolute; so must the root be to compare them
	if err != nil {
		return nil, "", "", "", &strictyaml.Error{Msg: "recipes root: " + strictyaml.CleanIOError(err)}
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return nil, "", "", "", &strictyaml.Error{Msg: "recipes root: " + strictyaml.CleanIOError(err)}
	}
	if realFile, err := filepath.EvalSymlinks(file); err == nil {
		if rel, err := filepath.Rel(realRoot, realFile); err != nil || !filepath.IsLocal(rel) {
			return nil, "", "", "", &strictyaml.Error{Msg: fmt.Sprintf("recipe %s resolves to %s, outside the recipes root %s", clean, realFile, strictyaml.DisplayPath(realRoot))}
		}
	}
	if data, err = readRecipe(root, clean, file); err != nil {
		if _, serr := os.Stat(file); errors.Is(serr, fs.ErrNotExist) {
			return nil, "", "", "", missingRecipe{err.(*strictyaml.Error)}
		}
		return nil, "", "", "", err
	}
	return data, file, clean, selector, nil
}

// ModelDir finds the recipe's checkpoint directory: the cluster profile's
// entry for its model alias, or the recipe's own absolute path ("" when
// neither names one). c may be nil.
func (r *Recipe) ModelDir(c *Cluster) string {
	if c != nil {
		if m, ok := c.Models[r.Model.Path]; ok {
			return m.Path
		}
	}
	if filepath.IsAbs(r.Model.Path) {
		return r.Model.Path
	}
	return ""
}

// ModelName names {MODEL_DIR:...} without a profile: the checkpoint
// repository's base name from the recipe's identity, else the alias.
func (r *Recipe) ModelName() string {
	if v, _ := r.Identity.Get("model"); v != nil {
		if m, ok := v.(*Map); ok && m.Str("repo") != "" {
			return filepath.Base(m.Str("repo"))
		}
	}
	return filepath.Base(r.Model.Path)
}
