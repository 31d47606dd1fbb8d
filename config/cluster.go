package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
)

// Cluster is a cluster profile: the partition sweeps run on, how jobs are
// launched there and where files live.
type Cluster struct {
	Path string // absolute path of the profile

	Name          string
	Backend       string // "slurm" or "local"
	Nodes         int
	GPUsPerNode   int
	GPUType       string
	Partition     string
	Account       string
	SharedRoot    string // shared filesystem root visible from every node (absolute)
	NodeLocalRoot string // node-local NVMe root (absolute)
	Launcher      string // slurm: "sbatch" or "srtctl"; local: "local"
	RecipesRoot   string // where CONFIG_FILE paths resolve (absolute; may be empty)
	// InferenceX and SrtSlurm are the user's checkouts (absolute; may be
	// empty). With InferenceX, the recipes root is composed from both as
	// InferenceX's launchers lay it (overlay.RecipesRoot); srt-root and
	// infmax-workspace default to them.
	InferenceX, SrtSlurm string
	// SrtslurmYAML is the srt-slurm cluster file (srtslurm.yaml) whose
	// model_paths and containers the profile takes (absolute; may be empty).
	SrtslurmYAML     string
	TaskQueue        string // Temporal task queue of this cluster's workers
	DefaultTimeLimit time.Duration
	Runners          []string         // runner labels this cluster serves (empty: any)
	Models           map[string]Model // recipe model.Path alias -> locations

	// Engine launch (slurm backend): how the process set srtlaunch.Render
	// produces is started on the nodes.
	Runtime string // "pyxis" (containers through srun --container-*) or "none"
	// Containers maps a recipe's container name (model.container, the
	// nginx image) to the image or squash file srun runs; an unlisted name
	// is passed through as it is.
	Containers map[string]string
	// RowImageContainers are the container names that stand for the matrix
	// row's own image, as InferenceX's launchers write them into
	// srtslurm.yaml (dynamo-sglang, dynamo-trtllm): a recipe naming one runs
	// the key's image, resolved through Containers like any image name.
	RowImageContainers []string
	SrtRoot            string // srt-slurm checkout: configs, runtime and benchmark scripts (absolute)
	InfmaxWorkspace    string // InferenceX checkout mounted at /infmax-workspace (absolute; may be empty)
	// PerfClient drives perf on this cluster: "benchmark" runs the recipe's
	// benchmark process (InferenceX's figures), "loadgen" sweepflow's own
	// load generator from the worker.
	PerfClient string
	// Emulation, when set, marks an emulated partition: every rendered
	// command is handed to a simulator role (contract in docs/slurm.md).
	Emulation *Emulation
	// ServeCommand (local backend, yaml "serve-command") is the argv of a
	// real engine the local backend starts instead of the simulator, with
	// the placeholders of cluster/local.Config.ServeCommand. Each word has
	// ${VAR} references expanded; a word starting with ./ or ../ is a path
	// relative to the profile's directory. Empty: the simulator.
	ServeCommand []string
	// BringUpTime is how long a server of this cluster takes from launch to
	// healthy (yaml "bring-up-time: 20m"); 0 when the profile does not say.
	// Node-minute estimates (`starter bench nodeminutes`) use it.
	BringUpTime time.Duration
	// FailureSignatures are the profile's own engine-crash signatures
	// (yaml "failure-signatures: [{class, pattern}]"); they are tried
	// before the built-in ones of package failure.
	FailureSignatures []failure.Signature
	// BadNodes says when a node with hardware-like failures is kept out of
	// new allocations (yaml "bad-nodes: {attempts: 2, window: 24h}";
	// default nodehealth.DefaultPolicy).
	BadNodes nodehealth.Policy
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
// simulator (the local backend without a serve-command, or an emulated
// Slurm partition).
func (c *Cluster) Simulated() bool {
	return (c.Backend == BackendLocal && len(c.ServeCommand) == 0) || c.Emulation != nil
}

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
		"runtime", "containers", "row-image-containers", "srt-root", "infmax-workspace", "perf-client", "emulation",
		"bring-up-time", "failure-signatures", "bad-nodes", "inferencex", "srt-slurm", "srtslurm-yaml", "serve-command"}
	badNodeFields    = []string{"attempts", "window"}
	signatureFields  = []string{"class", "pattern"}
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
	display := strictyaml.DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: "cannot read cluster profile: " + strictyaml.CleanIOError(err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: err.Error()}
	}
	return ParseCluster(display, abs, data)
}

// ParseCluster validates a cluster profile held in memory; abs is the
// profile's absolute path (relative paths resolve against its directory).
func ParseCluster(display, abs string, data []byte) (*Cluster, error) {
	var errs strictyaml.Errors
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	m := d.Mapping(root, "", clusterFields)
	if m == nil {
		return nil, errs.Err()
	}
	dir := filepath.Dir(abs)
	c := &Cluster{Path: abs, Models: map[string]Model{}}
	c.Name = m.ReqStr("name")
	if c.Name != "" && !nameRe.MatchString(c.Name) {
		d.Errorf(m.Values["name"], "name", "must be letters, digits, '.', '_' or '-', got %q", c.Name)
	}
	c.Backend = m.ReqStr("backend")
	if m.Has("backend") && c.Backend != BackendSlurm && c.Backend != BackendLocal {
		d.Errorf(m.Values["backend"], "backend", "expected slurm or local, got %q", c.Backend)
	}
	if v, ok := m.ReqInt("nodes"); ok {
		if v <= 0 || v > 1<<16 {
			d.Errorf(m.Values["nodes"], "nodes", "must be > 0, got %d", v)
		}
		c.Nodes = int(v)
	}
	if v, ok := m.ReqInt("gpus-per-node"); ok {
		if v <= 0 || v > 1<<10 {
			d.Errorf(m.Values["gpus-per-node"], "gpus-per-node", "must be > 0, got %d", v)
		}
		c.GPUsPerNode = int(v)
	}
	c.GPUType, _ = m.OptStr("gpu-type")
	c.Partition, _ = m.OptStr("partition")
	if c.Backend == BackendSlurm && c.Partition == "" {
		d.Errorf(m.Node, "partition", "required for the slurm backend")
	}
	c.Account, _ = m.OptStr("account")
	c.SharedRoot = d.pathField(m, "shared-root", dir, true)
	c.NodeLocalRoot = d.pathField(m, "node-local-root", dir, true)
	c.RecipesRoot = d.pathField(m, "recipes-root", dir, false)
	c.Launcher, _ = m.OptStr("launcher")
	switch c.Backend {
	case BackendSlurm:
		if c.Launcher == "" {
			c.Launcher = "sbatch"
		}
		switch c.Launcher {
		case "sbatch":
		case "srtctl":
			d.Errorf(m.Values["launcher"], "launcher", "srtctl was removed: it could not run sweepflow's stages (health, perf, eval restart); use sbatch, which launches the same srt-slurm process set itself")
		default:
			d.Errorf(m.Values["launcher"], "launcher", "expected sbatch for the slurm backend, got %q", c.Launcher)
		}
	case BackendLocal:
		if c.Launcher == "" {
			c.Launcher = "local"
		}
		if c.Launcher != "local" {
			d.Errorf(m.Values["launcher"], "launcher", "expected local for the local backend, got %q", c.Launcher)
		}
	}
	c.TaskQueue, _ = m.OptStr("task-queue")
	if c.TaskQueue == "" && c.Name != "" {
		c.TaskQueue = "cluster-" + c.Name
	}
	c.BringUpTime = d.durationField(m, "bring-up-time")
	d.badNodes(m, c)
	c.DefaultTimeLimit = 6 * time.Hour
	if n := m.Get("default-time-limit"); n != nil {
		if v, ok := d.Scalar(n, "default-time-limit"); ok {
			if dur, err := ParseSlurmTime(fmt.Sprint(v)); err != nil {
				d.Errorf(n, "default-time-limit", "%v", err)
			} else {
				c.DefaultTimeLimit = dur
			}
		}
	}
	if n := m.Get("runners"); n != nil {
		if items, ok := d.Seq(n, "runners"); ok {
			for i, it := range items {
				if s, ok := d.Str(it, strictyaml.Index("runners", i)); ok {
					c.Runners = append(c.Runners, s)
				}
			}
		}
	}
	if n := m.Get("models"); n != nil {
		if mm := d.Mapping(n, "models", nil); mm != nil {
			for _, alias := range mm.Keys {
				if am := d.Mapping(mm.Values[alias], mm.Field(alias), modelFields); am != nil {
					c.Models[alias] = Model{
						Path:   d.pathField(am, "path", dir, true),
						Source: d.pathField(am, "source", dir, false),
					}
				}
			}
		}
	}
	d.launchFields(m, c, dir)
	d.checkouts(m, c, dir)
	d.signatures(m, c)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// launchFields reads the engine-launch fields of a profile.
func (d *decoder) launchFields(m *strictyaml.Mapping, c *Cluster, dir string) {
	c.Runtime, _ = m.OptStr("runtime")
	if c.Runtime == "" {
		c.Runtime = RuntimeNone
	}
	if c.Runtime != RuntimePyxis && c.Runtime != RuntimeNone {
		d.Errorf(m.Values["runtime"], "runtime", "expected pyxis or none, got %q", c.Runtime)
	}
	c.Containers = map[string]string{}
	if n := m.Get("containers"); n != nil {
		if cm := d.Mapping(n, "containers", nil); cm != nil {
			for _, k := range cm.Keys {
				if v, ok := d.Str(cm.Values[k], cm.Field(k)); ok {
					if v == "" {
						d.Errorf(cm.Values[k], cm.Field(k), "must not be empty")
						continue
					}
					c.Containers[k] = v
				}
			}
		}
	}
	if n := m.Get("row-image-containers"); n != nil {
		if items, ok := d.Seq(n, "row-image-containers"); ok {
			for i, it := range items {
				if s, ok := d.Str(it, strictyaml.Index("row-image-containers", i)); ok {
					c.RowImageContainers = append(c.RowImageContainers, s)
				}
			}
		}
	}
	c.SrtRoot = d.pathField(m, "srt-root", dir, false)
	c.InfmaxWorkspace = d.pathField(m, "infmax-workspace", dir, false)
	if n := m.Get("emulation"); n != nil {
		if em := d.Mapping(n, "emulation", emulationFields); em != nil {
			c.Emulation = &Emulation{}
			if items, ok := d.Seq(em.Get("entrypoints"), em.Field("entrypoints")); ok {
				for i, it := range items {
					f := strictyaml.Index(em.Field("entrypoints"), i)
					if im := d.Mapping(it, f, entrypointFields); im != nil {
						e := Entrypoint{Match: im.ReqStr("match"), Role: im.ReqStr("role")}
						if im.Has("match") && len(strings.Fields(e.Match)) == 0 {
							d.Errorf(im.Values["match"], im.Field("match"), "must name a command")
						}
						c.Emulation.Entrypoints = append(c.Emulation.Entrypoints, e)
					}
				}
			}
			if len(c.Emulation.Entrypoints) == 0 {
				d.Errorf(n, "emulation.entrypoints", "an emulated partition needs at least one entry point")
			}
		}
	}
	c.PerfClient, _ = m.OptStr("perf-client")
	if c.PerfClient == "" {
		c.PerfClient = PerfClientLoadgen
		if c.Backend == BackendSlurm && c.Emulation == nil {
			c.PerfClient = PerfClientBench
		}
	}
	if c.PerfClient != PerfClientBench && c.PerfClient != PerfClientLoadgen {
		d.Errorf(m.Values["perf-client"], "perf-client", "expected benchmark or loadgen, got %q", c.PerfClient)
	}
	if c.Backend == BackendLocal && c.PerfClient == PerfClientBench {
		d.Errorf(m.Values["perf-client"], "perf-client", "the local backend has no benchmark process; use loadgen")
	}
	if c.Backend == BackendLocal && c.Emulation != nil {
		d.Errorf(m.Values["emulation"], "emulation", "only for the slurm backend")
	}
	d.serveCommand(m, c, dir)
}

// serveCommand reads serve-command: the argv of a real engine on the local
// backend.
func (d *decoder) serveCommand(m *strictyaml.Mapping, c *Cluster, dir string) {
	n := m.Get("serve-command")
	if n == nil {
		return
	}
	if c.Backend != BackendLocal {
		d.Errorf(n, "serve-command", "only for the local backend (a slurm cluster launches the recipe's engine)")
		return
	}
	items, ok := d.Seq(n, "serve-command")
	if !ok {
		return
	}
	for i, it := range items {
		f := strictyaml.Index("serve-command", i)
		s, ok := d.Str(it, f)
		if !ok {
			continue
		}
		w, err := expandEnv(s)
		if err != nil {
			d.Errorf(it, f, "%v", err)
			continue
		}
		if strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") {
			w = resolvePath(dir, w)
		}
		c.ServeCommand = append(c.ServeCommand, w)
	}
	if len(items) == 0 || (len(c.ServeCommand) > 0 && c.ServeCommand[0] == "") {
		d.Errorf(n, "serve-command", "must name the engine's program")
	}
}

// checkouts reads the user's InferenceX and srt-slurm checkouts and the
// srtslurm.yaml the profile takes models and containers from.
func (d *decoder) checkouts(m *strictyaml.Mapping, c *Cluster, dir string) {
	c.InferenceX = d.pathField(m, "inferencex", dir, false)
	c.SrtSlurm = d.pathField(m, "srt-slurm", dir, false)
	if c.InferenceX != "" && c.RecipesRoot != "" {
		d.Errorf(m.Values["recipes-root"], "recipes-root", "give either recipes-root (a tree composed by hand) or inferencex (composed from the checkouts as InferenceX's launchers lay it), not both")
	}
	if c.InferenceX == "" && c.RecipesRoot == "" {
		c.RecipesRoot = c.SrtSlurm // srtctl's own recipes
	}
	if c.SrtRoot == "" {
		c.SrtRoot = c.SrtSlurm
		if c.SrtRoot == "" && c.InferenceX != "" {
			c.SrtRoot = filepath.Join(c.InferenceX, "utils", "srt-slurm") // the checkout InferenceX pins from PR #3086 on
		}
	}
	if c.InfmaxWorkspace == "" {
		c.InfmaxWorkspace = c.InferenceX
	}
	c.SrtslurmYAML = d.pathField(m, "srtslurm-yaml", dir, false)
	if c.SrtslurmYAML == "" {
		return
	}
	s, err := LoadSrtslurm(c.SrtslurmYAML)
	if err != nil {
		d.Errorf(m.Values["srtslurm-yaml"], "srtslurm-yaml", "%v", err)
		return
	}
	// The profile's own entries are the more specific: they win.
	for alias, p := range s.ModelPaths {
		if _, ok := c.Models[alias]; !ok {
			c.Models[alias] = Model{Path: p}
		}
	}
	for name, img := range s.Containers {
		if _, ok := c.Containers[name]; !ok {
			c.Containers[name] = img
		}
	}
}

// badNodes reads bad-nodes: how many hardware-like failures within which
// window exclude a node; either may be left out for its default.
func (d *decoder) badNodes(m *strictyaml.Mapping, c *Cluster) {
	c.BadNodes = nodehealth.DefaultPolicy
	n := m.Get("bad-nodes")
	if n == nil {
		return
	}
	bm := d.Mapping(n, "bad-nodes", badNodeFields)
	if bm == nil {
		return
	}
	if v, ok := bm.OptInt("attempts"); ok {
		if v < 0 {
			d.Errorf(bm.Values["attempts"], bm.Field("attempts"), "expected 0 (never exclude) or more, got %d", v)
		}
		c.BadNodes.Attempts = int(v)
	}
	if wn := bm.Get("window"); wn != nil {
		if v, ok := d.Scalar(wn, bm.Field("window")); ok {
			dur, err := time.ParseDuration(fmt.Sprint(v))
			if err != nil || dur <= 0 {
				d.Errorf(wn, bm.Field("window"), "expected a positive duration such as 24h, got %q", fmt.Sprint(v))
			} else {
				c.BadNodes.Window = dur
			}
		}
	}
}

// signatures reads failure-signatures: each a class and a regular
// expression matched against one line of a role's log tail.
func (d *decoder) signatures(m *strictyaml.Mapping, c *Cluster) {
	n := m.Get("failure-signatures")
	if n == nil {
		return
	}
	items, ok := d.Seq(n, "failure-signatures")
	if !ok {
		return
	}
	for i, it := range items {
		f := strictyaml.Index("failure-signatures", i)
		sm := d.Mapping(it, f, signatureFields)
		if sm == nil {
			continue
		}
		class, pattern := sm.ReqStr("class"), sm.ReqStr("pattern")
		if !sm.Has("class") || !sm.Has("pattern") {
			continue
		}
		s, err := failure.NewSignature(class, pattern, d.Pos(it).String())
		if err != nil {
			field := sm.Field("pattern")
			node := sm.Values["pattern"]
			if !failure.ValidClass(class) {
				field, node = sm.Field("class"), sm.Values["class"]
			}
			d.Errorf(node, field, "%v", err)
			continue
		}
		c.FailureSignatures = append(c.FailureSignatures, s)
	}
}

// ServesRunner reports whether rows for runner may run on this cluster.
func (c *Cluster) ServesRunner(runner string) bool {
	if len(c.Runners) == 0 {
		return true
	}
	return slices.Contains(c.Runners, runner)
}

// pathField reads a path, expands ${VAR} references and makes it absolute.
func (d *decoder) pathField(m *strictyaml.Mapping, key, dir string, required bool) string {
	var (
		s  string
		ok bool
	)
	if required {
		if !m.Has(key) {
			m.Missing(key)
			return ""
		}
		s, ok = d.Str(m.Values[key], m.Field(key))
	} else {
		s, ok = m.OptStr(key)
	}
	if !ok {
		return ""
	}
	expanded, err := expandEnv(s)
	if err != nil {
		d.Errorf(m.Values[key], m.Field(key), "%v", err)
		return ""
	}
	if expanded == "" {
		d.Errorf(m.Values[key], m.Field(key), "must not be empty")
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
func (d *decoder) durationField(m *strictyaml.Mapping, key string) time.Duration {
	n := m.Get(key)
	if n == nil {
		return 0
	}
	v, ok := d.Scalar(n, key)
	if !ok {
		return 0
	}
	dur, err := time.ParseDuration(fmt.Sprint(v))
	if err != nil || dur <= 0 {
		d.Errorf(n, key, "expected a positive duration such as 20m or 1h30m, got %q", fmt.Sprint(v))
		return 0
	}
	return dur
}
