package config

import (
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/point"
)

// Sweep bundles what one sweep runs: master config files, the runners file,
// the config keys to expand, the cluster profile and the recipes root. Paths
// in the file are relative to the sweep file; the struct holds them absolute.
type Sweep struct {
	Name         string
	Path         string // absolute path of the sweep file ("" when built from flags)
	Description  string
	ConfigFiles  []string
	RunnerConfig string
	ConfigKeys   []string
	ClusterPath  string
	RecipesRoot  string // "" means: use the cluster profile's recipes root
	Evals        bool   // run GSM8K evals where InferenceX would (default true)
	// GoldenAL is InferenceX's golden acceptance-length file for the model
	// (utils/golden_al_distribution); perf runs inject its AL for the
	// recipe's draft length and Thinking mode. "" keeps the rows' own
	// SYNTHETIC_ACCEPTANCE_LENGTH.
	GoldenAL string
	Thinking bool // thinking_on (default) or thinking_off golden values
	// Regression holds the tolerances a nightly run compares with.
	Regression Regression
	// Adaptive are the config keys whose deployments get adaptive points
	// (the `adaptive:` list): fill or slo, each with its budget.
	Adaptive []point.Adaptive
	// AdaptivePos is where each Adaptive entry is written.
	AdaptivePos []strictyaml.Pos
}

// Regression is the optional `regression:` mapping of a sweep file: how much
// worse than its baseline a nightly point may get, in percent, before it is
// reported. A negative value turns that check off.
type Regression struct {
	OutputTputPerGPUDropPct float64 // output-tput-per-gpu-drop-pct, default 5
	TTFTp90RisePct          float64 // ttft-p90-rise-pct, default 10
	InteractivityDropPct    float64 // interactivity-drop-pct, default 5
}

var sweepFields = []string{"name", "description", "config-files", "runner-config", "config-keys", "cluster", "recipes-root", "evals", "golden-al", "thinking", "regression", "adaptive"}

var adaptiveFields = []string{"config-key", "mode", "topology", "factor", "slo", "grid", "max-points", "max-node-hours"}

var regressionFields = []string{"output-tput-per-gpu-drop-pct", "ttft-p90-rise-pct", "interactivity-drop-pct"}

// LoadSweep reads and validates a sweep file.
func LoadSweep(path string) (*Sweep, error) {
	display := strictyaml.DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: "cannot read sweep file: " + strictyaml.CleanIOError(err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: err.Error()}
	}
	return ParseSweep(display, abs, data)
}

// ParseSweep validates a sweep file held in memory; abs is its absolute path.
func ParseSweep(display, abs string, data []byte) (*Sweep, error) {
	var errs strictyaml.Errors
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	m := d.Mapping(root, "", sweepFields)
	if m == nil {
		return nil, errs.Err()
	}
	dir := filepath.Dir(abs)
	s := &Sweep{Path: abs, Evals: true, Thinking: true,
		Regression: Regression{OutputTputPerGPUDropPct: 5, TTFTp90RisePct: 10, InteractivityDropPct: 5}}
	s.Name = m.ReqStr("name")
	if s.Name != "" && !nameRe.MatchString(s.Name) {
		d.Errorf(m.Values["name"], "name", "must be letters, digits, '.', '_' or '-', got %q", s.Name)
	}
	s.Description, _ = m.OptStr("description")
	for _, p := range d.stringList(m, "config-files", true) {
		s.ConfigFiles = append(s.ConfigFiles, resolvePath(dir, p))
	}
	if p := m.ReqStr("runner-config"); p != "" {
		s.RunnerConfig = resolvePath(dir, p)
	}
	s.ConfigKeys = d.stringList(m, "config-keys", true)
	if p := m.ReqStr("cluster"); p != "" {
		s.ClusterPath = resolvePath(dir, p)
	}
	if p, ok := m.OptStr("recipes-root"); ok && p != "" {
		s.RecipesRoot = resolvePath(dir, p)
	}
	if v, ok := m.OptBool("evals"); ok {
		s.Evals = v
	}
	if p, ok := m.OptStr("golden-al"); ok && p != "" {
		exp, err := expandEnv(p)
		if err != nil {
			d.Errorf(m.Values["golden-al"], "golden-al", "%v", err)
		} else {
			s.GoldenAL = resolvePath(dir, exp)
			if _, err := os.Stat(s.GoldenAL); err != nil {
				d.Errorf(m.Values["golden-al"], "golden-al", "cannot read golden AL file %s: %s", strictyaml.DisplayPath(s.GoldenAL), strictyaml.CleanIOError(err))
			}
		}
	}
	if v, ok := m.OptBool("thinking"); ok {
		s.Thinking = v
	}
	if n := m.Get("regression"); n != nil {
		if rm := d.Mapping(n, "regression", regressionFields); rm != nil {
			dst := map[string]*float64{"output-tput-per-gpu-drop-pct": &s.Regression.OutputTputPerGPUDropPct,
				"ttft-p90-rise-pct": &s.Regression.TTFTp90RisePct, "interactivity-drop-pct": &s.Regression.InteractivityDropPct}
			for _, key := range regressionFields { // file order of errors: fixed
				if v := rm.Get(key); v != nil {
					if f, _, ok := d.Number(v, rm.Field(key)); ok {
						*dst[key] = f
					}
				}
			}
		}
	}
	if n := m.Get("adaptive"); n != nil {
		s.Adaptive, s.AdaptivePos = d.adaptiveList(n, m.Field("adaptive"))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// adaptiveList reads the `adaptive:` list: one entry per config key.
func (d *decoder) adaptiveList(n *yaml.Node, field string) ([]point.Adaptive, []strictyaml.Pos) {
	items, ok := d.Seq(n, field)
	if !ok {
		return nil, nil
	}
	var out []point.Adaptive
	var pos []strictyaml.Pos
	seen := map[string]int{}
	for i, it := range items {
		path := strictyaml.Index(field, i)
		m := d.Mapping(it, path, adaptiveFields)
		if m == nil {
			continue
		}
		a := point.Adaptive{ConfigKey: m.ReqStr("config-key"), MaxPoints: point.DefaultAdaptivePoints}
		a.Mode = m.ReqStr("mode")
		a.Topology, _ = m.OptStr("topology")
		num := func(key string, dst *float64) {
			if v := m.Get(key); v != nil {
				*dst, _, _ = d.Number(v, m.Field(key))
			}
		}
		whole := func(mm *strictyaml.Mapping, key string, dst *int) {
			if v, ok := mm.OptInt(key); ok {
				*dst = int(v)
			}
		}
		num("factor", &a.Factor)
		num("max-node-hours", &a.MaxNodeHours)
		whole(m, "max-points", &a.MaxPoints)
		if v := m.Get("slo"); v != nil {
			if sm := d.Mapping(v, m.Field("slo"), []string{"metric", "max", "min"}); sm != nil {
				slo := point.SLO{Metric: sm.ReqStr("metric")}
				for _, f := range []struct {
					key string
					dst *float64
				}{{"max", &slo.Max}, {"min", &slo.Min}} {
					if v := sm.Get(f.key); v != nil {
						*f.dst, _, _ = d.Number(v, sm.Field(f.key))
					}
				}
				a.SLO = &slo
			}
		}
		if v := m.Get("grid"); v != nil {
			if gm := d.Mapping(v, m.Field("grid"), []string{"min", "max", "step"}); gm != nil {
				whole(gm, "min", &a.Grid.Min)
				whole(gm, "max", &a.Grid.Max)
				whole(gm, "step", &a.Grid.Step)
			}
		}
		if first, dup := seen[a.ConfigKey]; dup && a.ConfigKey != "" {
			d.Errorf(m.Values["config-key"], m.Field("config-key"), "%s already has adaptive points (%s)", a.ConfigKey, strictyaml.Index(field, first))
			continue
		}
		seen[a.ConfigKey] = i
		if a.ConfigKey == "" || a.Mode == "" {
			continue // already reported as missing
		}
		if err := a.Validate(); err != nil {
			// Validate's messages start with the field they are about.
			sub, msg, _ := strings.Cut(err.Error(), ": ")
			key, _, _ := strings.Cut(sub, ".")
			node := m.Values[key]
			if node == nil {
				node = m.Node
			}
			d.Errorf(node, strictyaml.Join(path, sub), "%s", msg)
			continue
		}
		out = append(out, a)
		pos = append(pos, d.Pos(m.Values["config-key"]))
	}
	return out, pos
}

// stringList reads a non-empty list of strings (a single string is accepted
// as a one-element list).
func (d *decoder) stringList(m *strictyaml.Mapping, key string, required bool) []string {
	n := m.Get(key)
	if n == nil {
		if required {
			m.Missing(key)
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		if s, ok := d.Str(n, m.Field(key)); ok && s != "" {
			return []string{s}
		}
		return nil
	}
	items, ok := d.Seq(n, m.Field(key))
	if !ok {
		return nil
	}
	if len(items) == 0 && required {
		d.Errorf(n, m.Field(key), "must not be empty")
	}
	var out []string
	for i, it := range items {
		if s, ok := d.Str(it, strictyaml.Index(m.Field(key), i)); ok {
			out = append(out, s)
		}
	}
	return out
}
