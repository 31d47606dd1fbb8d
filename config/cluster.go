package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Cluster is a cluster profile: the partition sweeps run on, how jobs are
// launched there and where files live.
type Cluster struct {
	Path string // absolute path of the profile

	Name             string
	Backend          string // "slurm" or "local"
	Nodes            int
	GPUsPerNode      int
	GPUType          string
	Partition        string
	Account          string
	SharedRoot       string // shared filesystem root visible from every node (absolute)
	NodeLocalRoot    string // node-local NVMe root (absolute)
	Launcher         string // slurm: "sbatch" or "srtctl"; local: "local"
	RecipesRoot      string // where CONFIG_FILE paths resolve (absolute; may be empty)
	TaskQueue        string // Temporal task queue of this cluster's workers
	DefaultTimeLimit time.Duration
	Runners          []string         // runner labels this cluster serves (empty: any)
	Models           map[string]Model // recipe model.path alias -> locations

	// Engine launch (slurm backend): how the process set srtlaunch.Render
	// produces is started on the nodes.
	Runtime string // "pyxis" (containers through srun --container-*) or "none"
	// Containers maps a recipe's container name (model.container, the
	// nginx image) to the image or squash file srun runs; an unlisted name
	// is passed through as it is.
	Containers      map[string]string
	SrtRoot         string // srt-slurm checkout: configs, runtime and benchmark scripts (absolute)
	InfmaxWorkspace string // InferenceX checkout mounted at /infmax-workspace (absolute; may be empty)
	// PerfClient drives perf on this cluster: "benchmark" runs the recipe's
	// benchmark process (InferenceX's figures), "loadgen" sweepflow's own
	// load generator from the worker.
	PerfClient string
	// Emulation, when set, marks an emulated partition: every rendered
	// command is handed to a simulator role (contract in README).
	Emulation *Emulation
	// BringUpTime is how long a server of this cluster takes from launch to
	// healthy (yaml "bring-up-time: 20m"); 0 when the profile does not say.
	// Node-minute estimates (`starter bench nodeminutes`) use it.
	BringUpTime time.Duration
}

// Emulation maps rendered engine commands to simulator roles.
type Emulation struct {
	Entrypoints []Entrypoint
}

// Entrypoint maps commands whose words start with Match to Role.
type Entrypoint struct {
	Match string
	Role  string
}

// Runtimes and perf clients a profile may name.
const (
	RuntimePyxis      = "pyxis"
	RuntimeNone       = "none"
	PerfClientBench   = "benchmark"
	PerfClientLoadgen = "loadgen"
)

// Simulated reports whether the engines this profile serves are sweepflow's
// simulator (the local backend, or an emulated Slurm partition).
func (c *Cluster) Simulated() bool { return c.Backend == BackendLocal || c.Emulation != nil }

// Model says where a checkpoint alias lives on a cluster.
type Model struct {
	Path   string // node-local path the engine loads (absolute)
	Source string // shared-filesystem copy staged onto each node (absolute; may be empty)
}

// Backends and launchers a profile may name.
const (
	BackendSlurm = "slurm"
	BackendLocal = "local"
)

var (
	clusterFields = []string{"name", "backend", "nodes", "gpus-per-node", "gpu-type", "partition", "account", "shared-root",
		"node-local-root", "launcher", "recipes-root", "task-queue", "default-time-limit", "runners", "models",
		"runtime", "containers", "srt-root", "infmax-workspace", "perf-client", "emulation",
		"bring-up-time"}
	modelFields      = []string{"path", "source"}
	emulationFields  = []string{"entrypoints"}
	entrypointFields = []string{"match", "role"}
	nameRe           = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envRefRe         = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)
)

// LoadCluster reads and validates a cluster profile. Path fields may use
// ${VAR} and ${VAR:-default}; relative paths resolve against the profile's
// directory.
func LoadCluster(path string) (*Cluster, error) {
	display := DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Pos: Pos{File: display}, Msg: "cannot read cluster profile: " + cleanIOError(err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{Pos: Pos{File: display}, Msg: err.Error()}
	}
	return ParseCluster(display, abs, data)
}

// ParseCluster validates a cluster profile held in memory; abs is the
// profile's absolute path (relative paths resolve against its directory).
func ParseCluster(display, abs string, data []byte) (*Cluster, error) {
	var errs errorList
	root, err := parseYAML(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{file: display, errs: &errs}
	m := d.mapping(root, "", clusterFields)
	if m == nil {
		return nil, errs.errs.Err()
	}
	dir := filepath.Dir(abs)
	c := &Cluster{Path: abs, Models: map[string]Model{}}
	c.Name = m.reqStr("name")
	if c.Name != "" && !nameRe.MatchString(c.Name) {
		d.errorf(m.value["name"], "name", "must be letters, digits, '.', '_' or '-', got %q", c.Name)
	}
	c.Backend = m.reqStr("backend")
	if m.has("backend") && c.Backend != BackendSlurm && c.Backend != BackendLocal {
		d.errorf(m.value["backend"], "backend", "expected slurm or local, got %q", c.Backend)
	}
	if v, ok := m.reqInt("nodes"); ok {
		if v <= 0 || v > 1<<16 {
			d.errorf(m.value["nodes"], "nodes", "must be > 0, got %d", v)
		}
		c.Nodes = int(v)
	}
	if v, ok := m.reqInt("gpus-per-node"); ok {
		if v <= 0 || v > 1<<10 {
			d.errorf(m.value["gpus-per-node"], "gpus-per-node", "must be > 0, got %d", v)
		}
		c.GPUsPerNode = int(v)
	}
	c.GPUType, _ = m.optStr("gpu-type")
	c.Partition, _ = m.optStr("partition")
	if c.Backend == BackendSlurm && c.Partition == "" {
		d.errorf(m.node, "partition", "required for the slurm backend")
	}
	c.Account, _ = m.optStr("account")
	c.SharedRoot = d.pathField(m, "shared-root", dir, true)
	c.NodeLocalRoot = d.pathField(m, "node-local-root", dir, true)
	c.RecipesRoot = d.pathField(m, "recipes-root", dir, false)
	c.Launcher, _ = m.optStr("launcher")
	switch c.Backend {
	case BackendSlurm:
		if c.Launcher == "" {
			c.Launcher = "sbatch"
		}
		switch c.Launcher {
		case "sbatch":
		case "srtctl":
			d.errorf(m.value["launcher"], "launcher", "srtctl was removed: it could not run sweepflow's stages (health, perf, eval restart); use sbatch, which launches the same srt-slurm process set itself")
		default:
			d.errorf(m.value["launcher"], "launcher", "expected sbatch for the slurm backend, got %q", c.Launcher)
		}
	case BackendLocal:
		if c.Launcher == "" {
			c.Launcher = "local"
		}
		if c.Launcher != "local" {
			d.errorf(m.value["launcher"], "launcher", "expected local for the local backend, got %q", c.Launcher)
		}
	}
	c.TaskQueue, _ = m.optStr("task-queue")
	if c.TaskQueue == "" && c.Name != "" {
		c.TaskQueue = "cluster-" + c.Name
	}
	c.BringUpTime = d.durationField(m, "bring-up-time")
	c.DefaultTimeLimit = 6 * time.Hour
	if n := m.get("default-time-limit"); n != nil {
		if v, ok := d.scalar(n, "default-time-limit"); ok {
			if dur, err := ParseSlurmTime(fmt.Sprint(v)); err != nil {
				d.errorf(n, "default-time-limit", "%v", err)
			} else {
				c.DefaultTimeLimit = dur
			}
		}
	}
	if n := m.get("runners"); n != nil {
		if items, ok := d.seq(n, "runners"); ok {
			for i, it := range items {
				if s, ok := d.str(it, idx("runners", i)); ok {
					c.Runners = append(c.Runners, s)
				}
			}
		}
	}
	if n := m.get("models"); n != nil {
		if mm := d.mapping(n, "models", nil); mm != nil {
			for _, alias := range mm.keys {
				if am := d.mapping(mm.value[alias], mm.field(alias), modelFields); am != nil {
					c.Models[alias] = Model{
						Path:   d.pathField(am, "path", dir, true),
						Source: d.pathField(am, "source", dir, false),
					}
				}
			}
		}
	}
	d.launchFields(m, c, dir)
	if err := errs.errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// launchFields reads the engine-launch fields of a profile.
func (d *decoder) launchFields(m *mapping, c *Cluster, dir string) {
	c.Runtime, _ = m.optStr("runtime")
	if c.Runtime == "" {
		c.Runtime = RuntimeNone
	}
	if c.Runtime != RuntimePyxis && c.Runtime != RuntimeNone {
		d.errorf(m.value["runtime"], "runtime", "expected pyxis or none, got %q", c.Runtime)
	}
	c.Containers = map[string]string{}
	if n := m.get("containers"); n != nil {
		if cm := d.mapping(n, "containers", nil); cm != nil {
			for _, k := range cm.keys {
				if v, ok := d.str(cm.value[k], cm.field(k)); ok {
					if v == "" {
						d.errorf(cm.value[k], cm.field(k), "must not be empty")
						continue
					}
					c.Containers[k] = v
				}
			}
		}
	}
	c.SrtRoot = d.pathField(m, "srt-root", dir, false)
	c.InfmaxWorkspace = d.pathField(m, "infmax-workspace", dir, false)
	if n := m.get("emulation"); n != nil {
		if em := d.mapping(n, "emulation", emulationFields); em != nil {
			c.Emulation = &Emulation{}
			if items, ok := d.seq(em.get("entrypoints"), em.field("entrypoints")); ok {
				for i, it := range items {
					f := idx(em.field("entrypoints"), i)
					if im := d.mapping(it, f, entrypointFields); im != nil {
						e := Entrypoint{Match: im.reqStr("match"), Role: im.reqStr("role")}
						if im.has("match") && len(strings.Fields(e.Match)) == 0 {
							d.errorf(im.value["match"], im.field("match"), "must name a command")
						}
						c.Emulation.Entrypoints = append(c.Emulation.Entrypoints, e)
					}
				}
			}
			if len(c.Emulation.Entrypoints) == 0 {
				d.errorf(n, "emulation.entrypoints", "an emulated partition needs at least one entry point")
			}
		}
	}
	c.PerfClient, _ = m.optStr("perf-client")
	if c.PerfClient == "" {
		c.PerfClient = PerfClientLoadgen
		if c.Backend == BackendSlurm && c.Emulation == nil {
			c.PerfClient = PerfClientBench
		}
	}
	if c.PerfClient != PerfClientBench && c.PerfClient != PerfClientLoadgen {
		d.errorf(m.value["perf-client"], "perf-client", "expected benchmark or loadgen, got %q", c.PerfClient)
	}
	if c.Backend == BackendLocal && c.PerfClient == PerfClientBench {
		d.errorf(m.value["perf-client"], "perf-client", "the local backend has no benchmark process; use loadgen")
	}
	if c.Backend == BackendLocal && c.Emulation != nil {
		d.errorf(m.value["emulation"], "emulation", "only for the slurm backend")
	}
}

// ServesRunner reports whether rows for runner may run on this cluster.
func (c *Cluster) ServesRunner(runner string) bool {
	if len(c.Runners) == 0 {
		return true
	}
	return contains(c.Runners, runner)
}

// pathField reads a path, expands ${VAR} references and makes it absolute.
func (d *decoder) pathField(m *mapping, key, dir string, required bool) string {
	var (
		s  string
		ok bool
	)
	if required {
		if !m.has(key) {
			m.missing(key)
			return ""
		}
		s, ok = d.str(m.value[key], m.field(key))
	} else {
		s, ok = m.optStr(key)
	}
	if !ok {
		return ""
	}
	expanded, err := expandEnv(s)
	if err != nil {
		d.errorf(m.value[key], m.field(key), "%v", err)
		return ""
	}
	if expanded == "" {
		d.errorf(m.value[key], m.field(key), "must not be empty")
		return ""
	}
	return resolvePath(dir, expanded)
}

func resolvePath(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}

// expandEnv replaces ${VAR} and ${VAR:-default}; an unset VAR without a
// default is an error rather than an empty path.
func expandEnv(s string) (string, error) {
	var firstErr error
	out := envRefRe.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRefRe.FindStringSubmatch(ref)
		if v, ok := os.LookupEnv(m[1]); ok && v != "" {
			return v
		}
		if m[2] != "" {
			return m[3]
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("environment variable %s is not set (use ${%s:-default})", m[1], m[1])
		}
		return ""
	})
	return out, firstErr
}

// durationField reads an optional positive Go duration ("20m", "1h30m").
func (d *decoder) durationField(m *mapping, key string) time.Duration {
	n := m.get(key)
	if n == nil {
		return 0
	}
	v, ok := d.scalar(n, key)
	if !ok {
		return 0
	}
	dur, err := time.ParseDuration(fmt.Sprint(v))
	if err != nil || dur <= 0 {
		d.errorf(n, key, "expected a positive duration such as 20m or 1h30m, got %q", fmt.Sprint(v))
		return 0
	}
	return dur
}
