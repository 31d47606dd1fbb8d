package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Srtslurm is srt-slurm's cluster file, srtslurm.yaml: the model aliases,
// container names and Slurm defaults srtctl applies to every recipe
// (srt-slurm v1.0.68, core/schema.py ClusterConfig). A cluster profile takes
// its model_paths and containers (srtslurm-yaml); `starter cluster import`
// writes a profile from it.
type Srtslurm struct {
	Path string // absolute

	Cluster          string
	DefaultAccount   string
	DefaultPartition string
	DefaultTimeLimit string
	GPUsPerNode      int
	SrtctlRoot       string            // the srt-slurm checkout (absolute; may be empty)
	ModelPaths       map[string]string // alias -> checkpoint directory (absolute)
	Containers       map[string]string // name -> image or squash file
	// Unused are the fields the file sets that a sweepflow profile has no
	// counterpart for (default_mounts, use_segment_sbatch_directive, ...),
	// in file order.
	Unused []string
}

// srtslurmFields are ClusterConfig's fields. srtctl validates the file
// against them and, on any other key, warns and runs without the file.
var (
	srtslurmFields = []string{"cluster", "default_account", "default_partition", "default_time_limit", "gpus_per_node",
		"network_interface", "use_gpus_per_node_directive", "use_segment_sbatch_directive", "use_exclusive_sbatch_directive",
		"use_het_jobs", "default_sbatch_directives", "default_health_check", "srtctl_root", "output_dir", "model_paths",
		"containers", "cloud", "default_mounts", "default_bash_preamble", "reporting", "telemetry", "nginx_raise_ulimit"}
	srtslurmCarried = []string{"cluster", "default_account", "default_partition", "default_time_limit", "gpus_per_node",
		"srtctl_root", "model_paths", "containers"}
)

// LoadSrtslurm reads an srtslurm.yaml strictly: a key srtctl does not know
// is an error here, since srtctl would drop the whole file for it.
func LoadSrtslurm(path string) (*Srtslurm, error) {
	display := strictyaml.DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: "cannot read srtslurm.yaml: " + strictyaml.CleanIOError(err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: err.Error()}
	}
	var errs strictyaml.Errors
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	m := d.Mapping(root, "", srtslurmFields)
	if m == nil {
		return nil, errs.Err()
	}
	s := &Srtslurm{Path: abs, ModelPaths: map[string]string{}, Containers: map[string]string{}}
	s.Cluster, _ = m.OptStr("cluster")
	s.DefaultAccount, _ = m.OptStr("default_account")
	s.DefaultPartition, _ = m.OptStr("default_partition")
	if n := m.Get("default_time_limit"); n != nil && !strictyaml.IsNull(n) {
		if v, ok := d.Scalar(n, "default_time_limit"); ok {
			s.DefaultTimeLimit = fmt.Sprint(v)
			if _, err := ParseSlurmTime(s.DefaultTimeLimit); err != nil {
				d.Errorf(n, "default_time_limit", "%v", err)
			}
		}
	}
	if v, ok := m.OptInt("gpus_per_node"); ok {
		if v <= 0 || v > 1<<10 {
			d.Errorf(m.Values["gpus_per_node"], "gpus_per_node", "must be > 0, got %d", v)
		}
		s.GPUsPerNode = int(v)
	}
	if p, ok := m.OptStr("srtctl_root"); ok && p != "" {
		s.SrtctlRoot = resolvePath(filepath.Dir(abs), p)
	}
	s.ModelPaths = d.srtslurmMap(m, "model_paths", true)
	s.Containers = d.srtslurmMap(m, "containers", false)
	for _, k := range m.Keys {
		if v := m.Values[k]; !slices.Contains(srtslurmCarried, k) && !strictyaml.IsNull(v) && !(v.Kind == yaml.ScalarNode && v.Value == "") {
			s.Unused = append(s.Unused, k)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// srtslurmMap reads a name -> string mapping; paths must be absolute (the
// checkpoint directories a profile's models name).
func (d *decoder) srtslurmMap(m *strictyaml.Mapping, key string, paths bool) map[string]string {
	out := map[string]string{}
	n := m.Get(key)
	if n == nil || strictyaml.IsNull(n) {
		return out
	}
	mm := d.Mapping(n, key, nil)
	if mm == nil {
		return out
	}
	for _, k := range mm.Keys {
		v, ok := d.Str(mm.Values[k], mm.Field(k))
		switch {
		case !ok:
		case v == "":
			d.Errorf(mm.Values[k], mm.Field(k), "must not be empty")
		case paths && !filepath.IsAbs(v):
			d.Errorf(mm.Values[k], mm.Field(k), "must be an absolute path, got %q", v)
		default:
			out[k] = v
		}
	}
	return out
}

// ProfileFrom is what a cluster profile needs that an srtslurm.yaml does
// not say (`starter cluster import`).
type ProfileFrom struct {
	Name          string // default: the file's cluster
	Nodes         int
	GPUsPerNode   int    // default: the file's gpus_per_node
	SharedRoot    string // absolute
	NodeLocalRoot string // absolute
	InferenceX    string // the InferenceX checkout (optional)
	Runners       []string
}

// Profile writes a cluster profile (YAML) with the file's Slurm defaults,
// model aliases and containers, and checks it loads. A model alias becomes
// a model with only a path: srtctl loads the checkpoint where it is, so
// there is nothing to stage.
func (s *Srtslurm) Profile(p ProfileFrom) ([]byte, error) {
	type model struct {
		Path string `yaml:"path"`
	}
	out := struct {
		Name             string            `yaml:"name"`
		Backend          string            `yaml:"backend"`
		Nodes            int               `yaml:"nodes"`
		GPUsPerNode      int               `yaml:"gpus-per-node"`
		Partition        string            `yaml:"partition,omitempty"`
		Account          string            `yaml:"account,omitempty"`
		DefaultTimeLimit string            `yaml:"default-time-limit,omitempty"`
		SharedRoot       string            `yaml:"shared-root"`
		NodeLocalRoot    string            `yaml:"node-local-root"`
		Launcher         string            `yaml:"launcher"`
		Runtime          string            `yaml:"runtime"`
		InferenceX       string            `yaml:"inferencex,omitempty"`
		SrtSlurm         string            `yaml:"srt-slurm,omitempty"`
		Runners          []string          `yaml:"runners,omitempty,flow"`
		Containers       map[string]string `yaml:"containers,omitempty"`
		Models           map[string]model  `yaml:"models,omitempty"`
	}{
		Name: p.Name, Backend: BackendSlurm, Nodes: p.Nodes, GPUsPerNode: p.GPUsPerNode,
		Partition: s.DefaultPartition, Account: s.DefaultAccount, DefaultTimeLimit: s.DefaultTimeLimit,
		SharedRoot: p.SharedRoot, NodeLocalRoot: p.NodeLocalRoot, Launcher: "sbatch", Runtime: RuntimePyxis,
		InferenceX: p.InferenceX, SrtSlurm: s.SrtctlRoot, Runners: p.Runners, Containers: s.Containers,
		Models: map[string]model{},
	}
	if out.Name == "" {
		out.Name = s.Cluster
	}
	if out.Name == "" {
		return nil, fmt.Errorf("%s: names no cluster: give the profile a name", s.Path)
	}
	if out.GPUsPerNode == 0 {
		out.GPUsPerNode = s.GPUsPerNode
	}
	for alias, path := range s.ModelPaths {
		out.Models[alias] = model{Path: path}
	}
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# Cluster profile written by `starter cluster import` from %s:\n# its Slurm defaults, model_paths (models) and containers.\n", s.Path)
	if len(s.Unused) > 0 {
		head += fmt.Sprintf("# Not carried (no counterpart in a profile): %s.\n", strings.Join(s.Unused, ", "))
	}
	data := append([]byte(head), body.Bytes()...)
	if _, err := ParseCluster("the imported profile", filepath.Join(filepath.Dir(s.Path), "imported.yaml"), data); err != nil {
		return nil, err
	}
	return data, nil
}
