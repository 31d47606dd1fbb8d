package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
)

// stepPrefix names the serving job steps, so a retry or the switch from the
// perf to the eval server finds and cancels them.
const stepPrefix = "sweepflow-serve-"

// benchPrefix names benchmark steps (not serving: a bring-up keeps them).
const benchPrefix = "sweepflow-bench-"

// telemetryPrefix names the DCGM exporter steps and collectorPrefix the
// power collector's (telemetry dcgm-power). Neither is serving: srt-slurm
// launches the exporters non-critical (their exit invalidates the power
// artifacts, not the benchmark), and the collector is stopped first, so it
// finalizes its manifest while the exporters still answer.
const (
	telemetryPrefix = "sweepflow-telemetry-"
	collectorPrefix = "sweepflow-power-"
)

// phaseMarkers are log lines that say how far a server got, checked in
// order; the furthest one seen is the phase reported while waiting.
var phaseMarkers = []struct {
	re    *regexp.Regexp
	phase string
}{
	{regexp.MustCompile(`(?i)load(ing)? (model )?weights`), "loading weights"},
	{regexp.MustCompile(`(?i)captur(e|ing) cuda graph`), "capturing graphs"},
	{regexp.MustCompile(`(?i)listening on`), "listening"},
	{regexp.MustCompile(`(?i)server is fired up|application startup complete`), "ready"},
}

// oomRe recognises an out-of-memory death in a step's log.
var oomRe = regexp.MustCompile(`(?i)out of memory|OutOfMemoryError|oom-kill|OUT_OF_MEMORY`)

// refusedRe recognises an engine refusing its arguments (argparse's
// "error: ..." after its usage line, sglang's ValueError on bad flags): no
// retry on fresh nodes can fix that.
var refusedRe = regexp.MustCompile(`(?m)^(usage: .*|.*: error: .*|ValueError: .*|AssertionError: .*)$`)

// Launch says how BringUp starts the process set srtlaunch.Render produces.
type Launch struct {
	// Runtime is config.RuntimePyxis (srun --container-* flags, as
	// srt-slurm passes them) or config.RuntimeNone (the command runs on the
	// node as it is).
	Runtime string
	// Containers maps a rendered container name to the image srun runs.
	Containers map[string]string
	// RowImageContainers stand for the point's own image (config.Cluster).
	RowImageContainers []string
	SrtRoot            string
	InfmaxWorkspace    string
	// Models resolves the recipe's model.path alias to the checkpoint
	// directory mounted at /model ("%n": the node name).
	Models map[string]config.Model
	// Entrypoints, on an emulated partition, map each rendered command to a
	// simulator role run as `<StarterBin> sim role ROLE -- ARGV`.
	Entrypoints []config.Entrypoint
	// SimEnv is the SWEEPFLOW_SIM_* environment of every emulated role
	// (SWEEPFLOW_SIM_MOUNTS is added per process).
	SimEnv map[string]string
	// InfraWait bounds the wait for etcd after the infra step starts
	// (srt-slurm: 300 s).
	InfraWait time.Duration
}

// containerName is the container a recipe's model.container stands for:
// the point's own image where the profile binds the name to it (as
// InferenceX's launchers bind dynamo-sglang and dynamo-trtllm to each key's
// image in srtslurm.yaml), else the name itself. Containers then maps it to
// what srun runs.
func (l *Launch) containerName(name, rowImage string) string {
	if rowImage != "" && slices.Contains(l.RowImageContainers, name) {
		return rowImage
	}
	return name
}

func (l *Launch) validate() error {
	if l.Runtime == "" {
		l.Runtime = config.RuntimeNone
	}
	if l.Runtime != config.RuntimePyxis && l.Runtime != config.RuntimeNone {
		return fmt.Errorf("runtime %q: expected pyxis or none", l.Runtime)
	}
	if l.SrtRoot == "" {
		return fmt.Errorf("the srt-slurm checkout (srt-root in the cluster profile) is required to launch engines")
	}
	if l.InfraWait <= 0 {
		l.InfraWait = 300 * time.Second
	}
	return nil
}

// Emulated reports whether commands go to simulator roles.
func (l *Launch) Emulated() bool { return len(l.Entrypoints) > 0 }

// RoleFor maps a rendered command to its simulator role: the first entry
// point whose words start the command's words, or, for `bash -c|-lc
// SCRIPT`, the words of SCRIPT (or of one of its `&&` parts); each also
// with its launcher words dropped (see withoutLaunchers).
func RoleFor(eps []config.Entrypoint, command []string) (string, bool) {
	words := [][]string{command}
	if len(command) == 3 && command[0] == "bash" && (command[1] == "-c" || command[1] == "-lc") {
		words = [][]string{strings.Fields(command[2])}
		for _, part := range strings.Split(command[2], "&&") {
			words = append(words, strings.Fields(part))
		}
	}
	var cands [][]string
	for _, w := range words {
		cands = append(cands, withoutLaunchers(w)...)
	}
	for _, e := range eps {
		want := strings.Fields(e.Match)
		for _, words := range cands {
			if hasPrefix(words, want) {
				return e.Role, true
			}
		}
	}
	return "", false
}

// numactlArg are numactl's options that take a value as the next word.
var numactlArg = map[string]bool{
	"-m": true, "--membind": true, "-N": true, "--cpunodebind": true, "-C": true, "--physcpubind": true,
	"-i": true, "--interleave": true, "-p": true, "--preferred": true, "-P": true, "--preferred-many": true,
	"-w": true, "--weighted-interleave": true,
}

// withoutLaunchers returns words, then words after each launcher prefix
// srt-slurm puts before an engine (TRTLLMProtocol.build_worker_command:
// `numactl -m 0,1` on GB200/GB300, then trtllm-llmapi-launch), so an entry
// point names the engine, not its wrappers.
func withoutLaunchers(words []string) [][]string {
	out := [][]string{words}
	w := words
	if len(w) > 0 && w[0] == "numactl" {
		i := 1
		for i < len(w) && strings.HasPrefix(w[i], "-") {
			if numactlArg[w[i]] {
				i++
			}
			i++
		}
		w = w[min(i, len(w)):]
		out = append(out, w)
	}
	if len(w) > 0 && w[0] == "trtllm-llmapi-launch" {
		out = append(out, w[1:])
	}
	return out
}

func hasPrefix(words, prefix []string) bool {
	if len(prefix) == 0 || len(words) < len(prefix) {
		return false
	}
	for i := range prefix {
		if words[i] != prefix[i] {
			return false
		}
	}
	return true
}

// kv is one ordered environment or option entry.
type kv struct {
	K string `json:"k"`
	V string `json:"v"`
}

// step is one rendered process, ready to srun.
type step struct {
	Name        string   `json:"name"` // Slurm step name
	Role        string   `json:"role"` // engine role (infra, prefill, ...)
	SimRole     string   `json:"sim_role,omitempty"`
	Nodes       []string `json:"nodes"`
	Output      string   `json:"output"`
	Command     []string `json:"command"`
	Env         []kv     `json:"env"`
	Image       string   `json:"image,omitempty"`
	Mounts      []kv     `json:"mounts,omitempty"` // host -> container
	SrunOptions []kv     `json:"srun_options,omitempty"`
	ExportEnv   []kv     `json:"export_env,omitempty"`
	MPI         string   `json:"mpi,omitempty"`
	// MPI launches (TensorRT-LLM): one task per GPU, --oversubscribe, --cpu-bind.
	Ntasks        int    `json:"ntasks,omitempty"`
	Oversubscribe bool   `json:"oversubscribe,omitempty"`
	CPUBind       string `json:"cpu_bind,omitempty"`
	// Program is what srun runs with real engines: the rendered `bash -c`
	// script (exports, preamble, command), or the command itself when
	// srt-slurm runs it bare (nginx).
	Program []string `json:"program"`
	// Unmapped says why an emulated benchmark step has no simulator role.
	Unmapped string `json:"unmapped,omitempty"`
}

// launchState is what a bring-up leaves in its log directory for Health,
// RunBenchmark and a retried activity.
type launchState struct {
	Started time.Time `json:"started"`
	// What was rendered: the allocation and the synthetic acceptance (0:
	// the eval-mode set).
	JobID       string   `json:"job_id"`
	Nodes       []string `json:"nodes"`
	RecipePath  string   `json:"recipe_path"`
	SyntheticAL float64  `json:"synthetic_al"`
	// WorkersOnly: this bring-up replaced the workers of the previous one
	// (ReusedFrom), whose infra, nginx and frontends kept running.
	WorkersOnly bool    `json:"workers_only,omitempty"`
	ReusedFrom  string  `json:"reused_from,omitempty"`
	BudgetSec   float64 `json:"budget_sec"`
	URL         string  `json:"url"`
	Prefill     int     `json:"expected_prefill"`
	Decode      int     `json:"expected_decode"`
	// Frontend is the recipe's frontend.type: "sglang" routers report their
	// workers on /workers, dynamo frontends on /health.
	Frontend  string `json:"frontend,omitempty"`
	Steps     []step `json:"steps"`
	Benchmark *step  `json:"benchmark,omitempty"`
	// Telemetry are the DCGM exporter steps and the power collector.
	Telemetry []step `json:"telemetry,omitempty"`
}

func stepName(p *srtlaunch.Process) string {
	base := strings.TrimSuffix(filepath.Base(p.Output), filepath.Ext(p.Output))
	if p.Role == srtlaunch.RoleTelemetry {
		return telemetryPrefix + base
	}
	return stepPrefix + base
}

func pairs(keys []string, get func(string) string) []kv {
	out := make([]kv, 0, len(keys))
	for _, k := range keys {
		out = append(out, kv{k, get(k)})
	}
	return out
}

// newStep converts a rendered process, mapping its image through the
// profile's containers.
func (l *Launch) newStep(p *srtlaunch.Process) (step, error) {
	s := step{Name: stepName(p), Role: string(p.Role), Nodes: p.Nodelist, Output: p.Output, Command: p.Command,
		Env:    pairs(p.EnvKeys(), func(k string) string { v, _ := p.EnvValue(k); return v }),
		Mounts: pairs(p.ContainerMounts.Keys, p.ContainerMounts.Str),
	}
	if n := len(p.Command); len(p.Argv) >= n && slices.Equal(p.Argv[len(p.Argv)-n:], p.Command) {
		s.Program = p.Command
	} else {
		s.Program = []string{"bash", "-c", p.Payload(p.BashPreamble)}
	}
	if p.SrunOptions != nil {
		s.SrunOptions = pairs(p.SrunOptions.Keys, p.SrunOptions.Str)
	}
	if p.SrunExportEnv != nil {
		s.ExportEnv = pairs(p.SrunExportEnv.Keys, p.SrunExportEnv.Str)
	}
	if p.MPI != nil {
		s.MPI = *p.MPI
	}
	s.Ntasks, s.Oversubscribe, s.CPUBind = p.Tasks()
	s.Image = p.ContainerImage
	if img, ok := l.Containers[p.ContainerImage]; ok {
		s.Image = img
	}
	if l.Emulated() {
		role, ok := RoleFor(l.Entrypoints, p.Command)
		switch {
		case !ok && p.Role == srtlaunch.RoleBenchmark:
			// Not part of the bring-up: only a perf that runs it needs a role.
			s.Unmapped = fmt.Sprintf("emulation: no entry point in the cluster profile matches the benchmark's command %q", p.CommandLine())
		case !ok:
			return s, fmt.Errorf("%w: emulation: no entry point in the cluster profile matches %s's command %q", cluster.ErrBadConfig, p.Output, p.CommandLine())
		}
		s.SimRole = role
	}
	return s, nil
}

// srunArgs is the srun command line of a step: srt-slurm's flags (job,
// overlap, nodes, output, container flags with the pyxis runtime, the
// recipe's srun_options, --export) plus a step name, then the program.
func (l *Launch) srunArgs(s step, jobID, starter string) []string {
	pyxis := l.Runtime == config.RuntimePyxis
	a := []string{"--jobid", jobID, "--overlap"}
	// The MPI flags and task count only with real engines: the emulation
	// runs one simulated process per step.
	ntasks := 1
	switch {
	case s.MPI != "" && pyxis:
		a = append(a, "--mpi", s.MPI)
		if s.Oversubscribe {
			a = append(a, "--oversubscribe")
		}
		if s.CPUBind != "" {
			a = append(a, "--cpu-bind="+s.CPUBind)
		}
		ntasks = max(s.Ntasks, 1)
	case s.MPI == "":
		ntasks = max(s.Ntasks, 1) // one task per node of a step over several (the DCGM exporters)
	}
	// An emulated step over several nodes (a TensorRT-LLM worker is one
	// srun over all its nodes) runs one role per node: srun shrinks a step
	// to its task count, and the emulated nodes have one CPU each, so not
	// srt-slurm's task per GPU; the role counts its world as nodes x GPUs
	// per node (sim/simrole runTRTLLM).
	if s.SimRole != "" {
		ntasks = max(1, len(s.Nodes))
	}
	a = append(a, "--nodes", strconv.Itoa(len(s.Nodes)), "--ntasks", strconv.Itoa(ntasks), "--nodelist", strings.Join(s.Nodes, ","),
		"--output", s.Output, "--job-name", s.Name)
	if pyxis && s.Image != "" {
		a = append(a, "--container-image", s.Image, "--no-container-entrypoint", "--no-container-mount-home")
		if len(s.Mounts) > 0 {
			ms := make([]string, len(s.Mounts))
			for i, m := range s.Mounts {
				ms[i] = m.K + ":" + m.V
			}
			a = append(a, "--container-mounts", strings.Join(ms, ","))
		}
	}
	for _, o := range s.SrunOptions {
		if !pyxis && strings.HasPrefix(o.K, "container-") {
			continue // a pyxis flag: plain srun would refuse it
		}
		if o.V != "" {
			a = append(a, "--"+o.K+"="+o.V)
		} else {
			a = append(a, "--"+o.K)
		}
	}
	if len(s.ExportEnv) > 0 {
		e := []string{"ALL"}
		for _, x := range s.ExportEnv {
			e = append(e, x.K+"="+x.V)
		}
		a = append(a, "--export="+strings.Join(e, ","))
	}
	if s.SimRole != "" {
		a = append(a, starter, "sim", "role", s.SimRole, "--")
		return append(a, s.Command...)
	}
	return append(a, s.Program...)
}

// stepEnv is the srun client's environment: the worker's, then (emulated
// roles, which skip the `bash -c` exports and install preamble) env_to_set
// in order and the SWEEPFLOW_SIM_* settings.
func (l *Launch) stepEnv(s step, extra []kv) []string {
	var env []string
	drop := map[string]bool{}
	for _, x := range s.Env {
		drop[x.K] = true
	}
	for _, x := range extra {
		drop[x.K] = true
	}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if drop[k] || strings.HasPrefix(k, "SWEEPFLOW_SIM_") {
			continue
		}
		env = append(env, e)
	}
	for _, x := range extra {
		env = append(env, x.K+"="+x.V)
	}
	if s.SimRole == "" {
		return env
	}
	for _, x := range s.Env {
		env = append(env, x.K+"="+x.V)
	}
	mounts := map[string]string{}
	node := ""
	if len(s.Nodes) > 0 {
		node = s.Nodes[0]
	}
	for _, m := range s.Mounts {
		mounts[m.V] = NodePath(m.K, node)
	}
	data, _ := json.Marshal(mounts)
	env = append(env, "SWEEPFLOW_SIM_MOUNTS="+string(data))
	for _, k := range sortedKeys(l.SimEnv) {
		env = append(env, k+"="+l.SimEnv[k])
	}
	return env
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// serveDir is where one bring-up's logs go (srt-slurm's LOG_DIR, /logs in
// the containers): serve-1, serve-2, ...
func nextServeDir(workDir string) (string, error) {
	entries, _ := os.ReadDir(workDir)
	n := 0
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "serve-")); err == nil && v > n {
			n = v
		}
	}
	dir := filepath.Join(workDir, fmt.Sprintf("serve-%d", n+1))
	return dir, os.MkdirAll(dir, 0o755)
}

// nodeAddrs resolves the allocation's nodes (the emulation's /etc/hosts maps
// gb200-NN to 10.0.0.N); a node that does not resolve keeps its name, as
// srt-slurm falls back to the hostname.
func nodeAddrs(ctx context.Context, nodes []string) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(rctx, n)
		cancel()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
				out[i] = a
				break
			}
		}
	}
	return out
}

// render produces the process set of a bring-up in dir.
func (b *Backend) render(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec, dir string, addrs []string) (*config.Recipe, *srtlaunch.Rendered, error) {
	if spec.RecipePath == "" {
		return nil, nil, fmt.Errorf("%w: the point has no recipe (CONFIG_FILE) to launch", cluster.ErrBadConfig)
	}
	rec, err := b.recipe(spec.RecipePath, spec.RecipeDigest, spec.RecipeSets)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return nil, nil, fmt.Errorf("%w: recipe %s: the cluster profile has no recipes-root", cluster.ErrBadConfig, spec.RecipePath)
	}
	l := b.cfg.Launch
	modelDir := ""
	if m, ok := l.Models[rec.Model.Path]; ok {
		modelDir = m.Path
	} else if filepath.IsAbs(rec.Model.Path) {
		modelDir = rec.Model.Path
	}
	if modelDir == "" && !strings.HasPrefix(rec.Model.Path, "hf:") {
		return nil, nil, fmt.Errorf("%w: recipe %s: model.path %q is not in the cluster profile's models", cluster.ErrBadConfig, rec.Display, rec.Model.Path)
	}
	paths := srtlaunch.Paths{LogDir: dir, ModelDir: modelDir, ModelName: filepath.Base(modelDir), Image: l.containerName(rec.Model.Container, spec.Image),
		SrtRoot: l.SrtRoot, InfmaxWorkspace: l.InfmaxWorkspace}
	if paths.Image == "" {
		return nil, nil, fmt.Errorf("%w: recipe %s: model.container is missing", cluster.ErrBadConfig, rec.Display)
	}
	rendered, err := srtlaunch.Render(rec, srtlaunch.Allocation{Nodes: alloc.Nodes, Addrs: addrs},
		srtlaunch.Options{SyntheticAL: spec.SyntheticAL, Paths: paths, JobID: alloc.JobID})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", cluster.ErrBadConfig, err)
	}
	// Health reads dynamo's /health, the SGLang router's /workers or
	// vLLM's own /v1/models; refuse rather than time out on a frontend
	// that answers elsewhere.
	switch rendered.Frontend {
	case "dynamo", "sglang", "vllm":
	default:
		return nil, nil, fmt.Errorf("%w: recipe %s: frontend.type %s: the Slurm backend reads worker health from dynamo frontends, SGLang routers or vllm serve only", cluster.ErrBadConfig, rec.Display, rendered.Frontend)
	}
	return rec, rendered, nil
}

// BringUp cancels any serving steps the job already runs (a retry, or the
// perf server making way for the eval server), renders the recipe's process
// set for the job's nodes (the golden-AL rewrite when spec.SyntheticAL > 0)
// and starts it as srt-slurm does: infra, then workers, then nginx and the
// frontends. It returns the public frontend (nginx or the single frontend,
// port 8000 on the head node); Health waits for the workers to register.
func (b *Backend) BringUp(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, error) {
	if err := b.Check(ctx, alloc); err != nil {
		return cluster.Server{}, err
	}
	if srv, ok, err := b.restartWorkers(ctx, alloc, spec); ok || err != nil {
		return srv, err
	}
	b.stopCollector(ctx, alloc)
	if err := b.stopSteps(ctx, alloc, stepPrefix, benchPrefix, telemetryPrefix, collectorPrefix); err != nil {
		return cluster.Server{}, err
	}
	dir, err := nextServeDir(alloc.WorkDir)
	if err != nil {
		return cluster.Server{}, err
	}
	addrs := nodeAddrs(ctx, alloc.Nodes)
	addrOf := map[string]string{}
	for i, n := range alloc.Nodes {
		addrOf[n] = addrs[i]
	}
	rec, rendered, err := b.render(ctx, alloc, spec, dir, addrs)
	if err != nil {
		return cluster.Server{}, err
	}
	procs := rendered.Processes
	st := launchState{Started: time.Now(), BudgetSec: healthBudget(rec.HealthCheck.Timeout(), spec), JobID: alloc.JobID, Nodes: alloc.Nodes,
		RecipePath: spec.RecipePath, SyntheticAL: spec.SyntheticAL, Frontend: rendered.Frontend}
	st.Prefill, st.Decode = srtlaunch.Expected(procs)
	var infra, mooncake, workers, fronts []step
	for _, p := range procs {
		s, err := b.cfg.Launch.newStep(p)
		if err != nil {
			return cluster.Server{}, err
		}
		switch p.Role {
		case srtlaunch.RoleInfra:
			infra = append(infra, s)
		case srtlaunch.RoleMooncake:
			mooncake = append(mooncake, s)
		case srtlaunch.RolePrefill, srtlaunch.RoleDecode, srtlaunch.RoleAgg:
			workers = append(workers, s)
		case srtlaunch.RoleNginx, srtlaunch.RoleFrontend:
			fronts = append(fronts, s)
		case srtlaunch.RoleTelemetry:
			st.Telemetry = append(st.Telemetry, s)
			continue
		case srtlaunch.RoleBenchmark:
			bs := s
			st.Benchmark = &bs
			continue
		}
		if p.Role == srtlaunch.RoleNginx || (p.Role == srtlaunch.RoleFrontend && st.URL == "") {
			st.URL = "http://" + net.JoinHostPort(addrOf[p.Nodelist[0]], "8000")
		}
		st.Steps = append(st.Steps, s)
	}
	if st.URL == "" && rendered.Frontend == "vllm" {
		// vllm serve on the aggregate leader is the public server.
		st.URL = "http://" + net.JoinHostPort(addrOf[rendered.PublicNode], "8000")
	}
	if rendered.Power != nil {
		col, err := b.collectorStep(dir, alloc, rendered.Power)
		if err != nil {
			return cluster.Server{}, err
		}
		st.Telemetry = append(st.Telemetry, col)
	}
	if err := writeFiles(dir, rendered.Files); err != nil {
		return cluster.Server{}, err
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), st); err != nil {
		return cluster.Server{}, err
	}
	srv := cluster.Server{URL: st.URL, Handle: filepath.Base(dir), Model: rendered.ServedModel}
	exited := make(chan string, len(st.Steps)+len(st.Telemetry))
	start := func(steps []step) error {
		for _, s := range steps {
			if err := ctx.Err(); err != nil {
				return err // a cancelled attempt starts nothing more
			}
			if err := b.startStep(alloc, s, simEnv(s, spec), exited); err != nil {
				return err
			}
		}
		return nil
	}
	if err := start(infra); err != nil {
		return srv, err
	}
	if len(infra) > 0 {
		if err := b.waitInfra(ctx, alloc, dir, infra[0], exited); err != nil {
			return srv, err
		}
	}
	// srt-slurm waits for the Mooncake master's RPC, metadata and metrics
	// ports before it starts the workers that join it.
	if err := start(mooncake); err != nil {
		return srv, err
	}
	for _, m := range mooncake {
		if err := b.waitPorts(ctx, alloc, dir, m, exited, mooncakePorts); err != nil {
			return srv, err
		}
	}
	if err := start(workers); err != nil {
		return srv, err
	}
	if err := start(fronts); err != nil {
		return srv, err
	}
	// Telemetry after the frontends (do_sweep.run): the exporters, then the
	// collector, which must see every expected GPU within the startup
	// timeout; a required one that does not fails the bring-up, as
	// srt-slurm then skips the formal benchmark.
	for _, s := range st.Telemetry {
		if err := b.startStep(alloc, s, nil, nil); err != nil { // not serving: an exit does not fail the bring-up
			return srv, err
		}
	}
	if p := rendered.Power; p != nil {
		if err := b.waitPowerReady(ctx, st.Telemetry[len(st.Telemetry)-1], p); err != nil {
			return srv, err
		}
	}
	// Health reads a step missing from squeue as a step that died: return
	// only once Slurm lists every step (srun registers a step a moment
	// after it starts).
	return srv, b.waitListed(ctx, alloc, dir, st.Steps, exited)
}

// stopCollector asks the power collector steps to finish (SIGTERM, which
// scancel's plain termination would follow with SIGKILL after KillWait)
// and waits up to a minute for them to write their terminal manifests and
// exit; what still runs then is cancelled with the rest.
func (b *Backend) stopCollector(ctx context.Context, alloc cluster.Allocation) {
	deadline := time.Now().Add(time.Minute)
	signalled := map[string]bool{}
	for time.Now().Before(deadline) {
		steps, err := b.steps(ctx, alloc, collectorPrefix)
		if err != nil || len(steps) == 0 {
			return
		}
		for id := range steps {
			if !signalled[id] {
				signalled[id] = true
				_, _ = run(ctx, nil, "scancel", "--signal=TERM", id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// mooncakePorts are the Mooncake master's RPC, HTTP metadata and metrics
// ports srt-slurm waits for (srtctl/ports.py).
var mooncakePorts = []int{8700, 8701, 8702}

// waitPorts waits until every port answers on the step's node, as
// srt-slurm's wait_for_port does (120 s each for the Mooncake master).
func (b *Backend) waitPorts(ctx context.Context, alloc cluster.Allocation, dir string, s step, exited <-chan string, ports []int) error {
	host := nodeAddrs(ctx, s.Nodes[:1])[0]
	deadline := time.After(2 * time.Minute)
	for _, port := range ports {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case name := <-exited:
				return b.stepDied(ctx, alloc, name, stepLog(dir, name))
			case <-deadline:
				return fmt.Errorf("%w: slurm job %s: %s did not answer on %s within 2 minutes: %s", cluster.ErrAllocationLost, alloc.JobID,
					s.Name, addr, tail(s.Output, 5))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(b.cfg.Poll / 4):
			}
		}
	}
	return nil
}

// collectorStep is the power collector (telemetry dcgm-power) as a step on
// the allocation's first node, the host srt-slurm's orchestrator and its
// collector run on: `starter power collect` with the settings the render
// gave, written beside the bring-up's logs; no container.
func (b *Backend) collectorStep(dir string, alloc cluster.Allocation, p *srtlaunch.PowerTelemetry) (step, error) {
	cfg := filepath.Join(dir, "power-collector.json")
	if err := writeJSON(cfg, p); err != nil {
		return step{}, err
	}
	prog := []string{b.cfg.StarterBin, "power", "collect", "--config", cfg}
	return step{Name: collectorPrefix + "collector", Role: "power-collector", Nodes: alloc.Nodes[:1],
		Output: filepath.Join(dir, "power_collector.out"), Command: prog, Program: prog}, nil
}

// powerReadyLine is what the collector logs once one scrape covered every
// expected GPU (power.Collector.Run).
const powerReadyLine = "power: every expected GPU reported"

// waitPowerReady waits the startup timeout for the collector's readiness;
// a required session that misses it fails the bring-up (srt-slurm skips the
// benchmark: its artifacts could never be published), a best-effort one
// goes on and the manifest records why.
func (b *Backend) waitPowerReady(ctx context.Context, col step, p *srtlaunch.PowerTelemetry) error {
	deadline := time.Now().Add(time.Duration(p.StartupTimeout * float64(time.Second)))
	for {
		if data, err := os.ReadFile(col.Output); err == nil && strings.Contains(string(data), powerReadyLine) {
			return nil
		}
		if time.Now().After(deadline) {
			if !p.Required {
				return nil
			}
			return fmt.Errorf("telemetry.required: the DCGM exporters did not report every expected GPU within %gs: %s",
				p.StartupTimeout, tail(col.Output, 3))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// waitListed waits until squeue lists every step of a bring-up; a step whose
// srun ended first is explained by stepDied.
func (b *Backend) waitListed(ctx context.Context, alloc cluster.Allocation, dir string, steps []step, exited <-chan string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		running, err := b.steps(ctx, alloc, stepPrefix)
		if err != nil {
			return err
		}
		listed := map[string]bool{}
		for _, n := range running {
			listed[n] = true
		}
		var missing []string
		for _, s := range steps {
			if !listed[s.Name] {
				missing = append(missing, s.Name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: slurm job %s: steps %s were not listed by squeue within a minute of srun", cluster.ErrAllocationLost,
				alloc.JobID, strings.Join(missing, ", "))
		}
		select {
		case name := <-exited:
			return b.stepDied(ctx, alloc, name, stepLog(dir, name))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// startStep sruns one step; the srun client must outlive this activity (and
// a crashed worker): killing it kills the step. Its own session keeps it out
// of the worker's signals; scancel in teardown ends it.
func (b *Backend) startStep(alloc cluster.Allocation, s step, extra []kv, exited chan<- string) error {
	dir := filepath.Dir(s.Output)
	logf, err := os.Create(filepath.Join(dir, "srun-"+strings.TrimPrefix(strings.TrimPrefix(s.Name, stepPrefix), benchPrefix)+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	if s.SimRole != "" && alloc.WorkDir != "" {
		// Which holder job a simulator role serves (fault injection selects
		// points by it): a step's own SLURM_JOB_NAME is the step's name.
		extra = append(extra, kv{"SWEEPFLOW_SIM_JOB", filepath.Base(alloc.WorkDir)})
	}
	cmd := exec.Command("srun", b.cfg.Launch.srunArgs(s, alloc.JobID, b.cfg.StarterBin)...)
	cmd.Stdout, cmd.Stderr, cmd.Env, cmd.Dir = logf, logf, b.cfg.Launch.stepEnv(s, extra), dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: srun: %v", cluster.ErrBadConfig, err)
	}
	go func() {
		_ = cmd.Wait()
		if exited != nil {
			exited <- s.Name
		}
	}()
	return nil
}

// waitInfra waits until etcd answers on the infra node, as srt-slurm's
// wait_for_port does before it starts workers.
func (b *Backend) waitInfra(ctx context.Context, alloc cluster.Allocation, dir string, infra step, exited <-chan string) error {
	addr := net.JoinHostPort(nodeAddrs(ctx, infra.Nodes[:1])[0], "2379")
	deadline := time.After(b.cfg.Launch.InfraWait)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case name := <-exited:
			return b.stepDied(ctx, alloc, name, stepLog(dir, name))
		case <-deadline:
			return fmt.Errorf("%w: slurm job %s: etcd on %s did not answer within %s: %s", cluster.ErrAllocationLost, alloc.JobID, addr,
				b.cfg.Launch.InfraWait, tail(infra.Output, 5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

func stepLog(dir, name string) string {
	st, err := readState(dir)
	if err == nil {
		for _, s := range st.Steps {
			if s.Name == name {
				return s.Output
			}
		}
	}
	return filepath.Join(dir, "srun-"+strings.TrimPrefix(name, stepPrefix)+".log")
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readState(dir string) (*launchState, error) {
	data, err := os.ReadFile(filepath.Join(dir, "launch.json"))
	if err != nil {
		return nil, err
	}
	var st launchState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "launch.json"), err)
	}
	return &st, nil
}

// writeFiles writes the files the render returned (nginx.conf, the
// TensorRT-LLM engine options, ...) into the bring-up's log directory,
// mounted at /logs, before any step starts: what runs is what was rendered.
func writeFiles(dir string, files map[string]string) error {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("%w: rendered file name %q is not a plain file name", cluster.ErrBadConfig, name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stepDied explains a step that ended: the job's own state first, then an
// OOM or a refused configuration in its log, else a lost server, with the
// tail of the log.
func (b *Backend) stepDied(ctx context.Context, alloc cluster.Allocation, name, logPath string) error {
	if err := b.Check(ctx, alloc); err != nil {
		return err
	}
	data, _ := os.ReadFile(logPath)
	role := strings.TrimPrefix(strings.TrimPrefix(name, stepPrefix), benchPrefix)
	last := tail(logPath, 5)
	if last == "" {
		// Nothing from the process: srun's own output says why.
		srunLog := filepath.Join(filepath.Dir(logPath), "srun-"+role+".log")
		data, _ = os.ReadFile(srunLog)
		if last = tail(srunLog, 5); last == "" {
			last = "(empty log)"
		} else {
			logPath = srunLog
		}
	}
	// The retry decision stays with the coarse patterns; the class and its
	// evidence come from the signature table.
	f, ok := b.cfg.Signatures.Match(string(data))
	if !ok {
		f = failure.Failure{Class: failure.EngineExit, Excerpt: role + ": " + last}
	}
	var err error
	switch {
	case oomRe.Match(data):
		err = fmt.Errorf("%w: %s of slurm job %s ran out of memory (%s): %s", cluster.ErrOOM, role, alloc.JobID, logPath, last)
	case refusedRe.Match(data):
		err = fmt.Errorf("%w: %s of slurm job %s refused its configuration (%s): %s", cluster.ErrBadConfig, role, alloc.JobID, logPath, last)
	default:
		err = fmt.Errorf("%w: %s of slurm job %s exited (%s): %s", cluster.ErrAllocationLost, role, alloc.JobID, logPath, last)
	}
	return failure.WithNodes(failure.Wrap(err, f.Class, f.Excerpt), namedNodes(f.Excerpt, alloc.Nodes)...)
}

// namedNodes are the allocation's nodes an evidence line names as a whole
// word: NCCL prefixes its lines with the host, syslog forwards a driver's
// Xid with it.
func namedNodes(line string, nodes []string) []string {
	var out []string
	for _, n := range nodes {
		for i := 0; n != ""; {
			j := strings.Index(line[i:], n)
			if j < 0 {
				break
			}
			j += i
			end := j + len(n)
			if (j == 0 || !nameByte(line[j-1])) && (end == len(line) || !nameByte(line[end])) {
				out = append(out, n)
				break
			}
			i = j + 1
		}
	}
	return out
}

func nameByte(c byte) bool {
	return c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// steps lists the job's steps whose names start with one of prefixes
// (id -> name).
func (b *Backend) steps(ctx context.Context, alloc cluster.Allocation, prefixes ...string) (map[string]string, error) {
	out, err := run(ctx, nil, "squeue", "-h", "-s", "-j", alloc.JobID, "-o", "%i|%j")
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return nil, nil
		}
		return nil, err
	}
	steps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, name, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				steps[id] = name
			}
		}
	}
	return steps, nil
}

func (b *Backend) stopSteps(ctx context.Context, alloc cluster.Allocation, prefixes ...string) error {
	return b.stopMatching(ctx, alloc, prefixes, func(string) bool { return true })
}

// stopMatching cancels the job's steps named with one of prefixes for which
// match holds, and waits until squeue no longer lists them.
func (b *Backend) stopMatching(ctx context.Context, alloc cluster.Allocation, prefixes []string, match func(name string) bool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		all, err := b.steps(ctx, alloc, prefixes...)
		if err != nil {
			return err
		}
		steps := map[string]string{}
		for id, name := range all {
			if match(name) {
				steps[id] = name
			}
		}
		if len(steps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm job %s: steps %v did not stop", alloc.JobID, steps)
		}
		for id := range steps {
			_, _ = run(ctx, nil, "scancel", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 2):
		}
	}
}

// errNotReady: the deployment is still coming up (the activity keeps
// polling and heartbeating the phase).
var errNotReady = errors.New("not ready")

// Health checks the job, then every step of the bring-up, then the public
// frontend's /health as srt-slurm's wait_for_model reads it: ready once the
// expected prefill and decode workers have registered. Past the recipe's
// health_check budget it fails with the tail of a worker that has not
// registered.
func (b *Backend) Health(ctx context.Context, alloc cluster.Allocation, srv cluster.Server) (string, error) {
	if err := b.Check(ctx, alloc); err != nil {
		return "job lost", err
	}
	dir := filepath.Join(alloc.WorkDir, srv.Handle)
	st, err := readState(dir)
	if err != nil {
		return "starting", fmt.Errorf("%w: bring-up state: %v", cluster.ErrAllocationLost, err)
	}
	running, err := b.steps(ctx, alloc, stepPrefix)
	if err != nil {
		return "starting", err
	}
	have := map[string]bool{}
	for _, n := range running {
		have[n] = true
	}
	for _, s := range st.Steps {
		if !have[s.Name] {
			return "exited", b.stepDied(ctx, alloc, s.Name, s.Output)
		}
	}
	phase := logPhase(st.Steps)
	gotP, gotD := 0, 0
	herr := func() error {
		var err error
		if gotP, gotD, err = frontendWorkers(ctx, srv.URL, st.Frontend); err != nil {
			return err
		}
		if gotP < st.Prefill || gotD < st.Decode {
			return errNotReady
		}
		return nil
	}()
	line := fmt.Sprintf("%d/%d workers registered (prefill %d/%d, decode %d/%d), phase %s",
		min(gotP, st.Prefill)+min(gotD, st.Decode), st.Prefill+st.Decode, gotP, st.Prefill, gotD, st.Decode, phase)
	if herr == nil {
		return "ready: " + line, nil
	}
	if !errors.Is(herr, errNotReady) {
		line = "frontend not answering (" + clip(herr.Error()) + "); " + line
	}
	if budget := time.Duration(st.BudgetSec * float64(time.Second)); budget > 0 && time.Since(st.Started) > budget {
		failing := st.Steps[0]
		for _, s := range st.Steps {
			if (s.Role == string(srtlaunch.RolePrefill) && gotP < st.Prefill) ||
				((s.Role == string(srtlaunch.RoleDecode) || s.Role == string(srtlaunch.RoleAgg)) && gotD < st.Decode) {
				failing = s
				break
			}
		}
		// Every step still runs (a dead one is stepDied's): the budget is
		// the evidence, with how far the deployment got.
		return line, failure.Wrap(fmt.Errorf("%w: slurm job %s: not healthy within the recipe's health_check budget %s: %s; %s: %s",
			cluster.ErrAllocationLost, alloc.JobID, budget, line, filepath.Base(failing.Output), tail(failing.Output, 5)),
			failure.HealthBudget, fmt.Sprintf("budget %s ran out: %s", budget, line))
	}
	return line, fmt.Errorf("%s", line)
}

// logPhase is the furthest marker any step's log shows.
func logPhase(steps []step) string {
	best := -1
	for _, s := range steps {
		data, err := os.ReadFile(s.Output)
		if err != nil {
			continue
		}
		for i, m := range phaseMarkers {
			if i > best && m.re.Match(data) {
				best = i
			}
		}
	}
	if best < 0 {
		return "starting"
	}
	return phaseMarkers[best].phase
}

var _ cluster.Backend = (*Backend)(nil)

func isWorker(role string) bool {
	switch srtlaunch.Role(role) {
	case srtlaunch.RolePrefill, srtlaunch.RoleDecode, srtlaunch.RoleAgg:
		return true
	}
	return false
}

// restartWorkers is the eval restart (issue 12: "eval restarts the workers
// without synthetic acceptance"): when the job already serves this recipe on
// these nodes and every infra, nginx and frontend step of that bring-up still
// runs, only the workers are replaced. The old workers are cancelled, the
// frontend must report their registrations gone (dynamo drops an instance
// when its etcd lease ends), then the newly rendered workers start and
// register with the same etcd, where the running frontends discover them.
// ok is false when there is nothing to reuse, or when the old registrations
// did not clear; the caller then does a full bring-up, which stops every
// step.
func (b *Backend) restartWorkers(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, bool, error) {
	prevDir := latestServeDir(alloc.WorkDir)
	if prevDir == "" {
		return cluster.Server{}, false, nil
	}
	prev, err := readState(prevDir)
	// An SGLang router holds the worker URLs it was started with and keeps
	// counting them while they restart, and vllm serve is its own frontend,
	// so their deployments come up whole.
	if err != nil || prev.RecipePath != spec.RecipePath || prev.JobID != alloc.JobID || !slices.Equal(prev.Nodes, alloc.Nodes) || prev.URL == "" ||
		prev.Frontend == "sglang" || prev.Frontend == "vllm" {
		return cluster.Server{}, false, nil
	}
	running, err := b.steps(ctx, alloc, stepPrefix)
	if err != nil {
		return cluster.Server{}, false, err
	}
	have := map[string]bool{}
	for _, n := range running {
		have[n] = true
	}
	var keep []step
	oldWorkers := map[string]bool{}
	for _, s := range prev.Steps {
		if isWorker(s.Role) {
			oldWorkers[s.Name] = true
			continue
		}
		if !have[s.Name] {
			return cluster.Server{}, false, nil // a full bring-up replaces what died
		}
		keep = append(keep, s)
	}
	if len(keep) == 0 {
		return cluster.Server{}, false, nil
	}
	if err := b.stopSteps(ctx, alloc, benchPrefix); err != nil {
		return cluster.Server{}, false, err
	}
	if err := b.stopMatching(ctx, alloc, []string{stepPrefix}, func(n string) bool { return oldWorkers[n] }); err != nil {
		return cluster.Server{}, false, err
	}
	if err := b.waitUnregistered(ctx, prev.URL, time.Minute); err != nil {
		return cluster.Server{}, false, nil
	}
	dir, err := nextServeDir(alloc.WorkDir)
	if err != nil {
		return cluster.Server{}, false, err
	}
	addrs := nodeAddrs(ctx, alloc.Nodes)
	rec, rendered, err := b.render(ctx, alloc, spec, dir, addrs)
	if err != nil {
		return cluster.Server{}, false, err
	}
	procs := rendered.Processes
	st := launchState{Started: time.Now(), BudgetSec: healthBudget(rec.HealthCheck.Timeout(), spec), JobID: alloc.JobID, Nodes: alloc.Nodes,
		RecipePath: spec.RecipePath, SyntheticAL: spec.SyntheticAL, WorkersOnly: true, ReusedFrom: filepath.Base(prevDir), URL: prev.URL}
	st.Prefill, st.Decode = srtlaunch.Expected(procs)
	var workers []step
	for _, p := range procs {
		s, err := b.cfg.Launch.newStep(p)
		if err != nil {
			return cluster.Server{}, false, err
		}
		switch {
		case isWorker(string(p.Role)):
			workers = append(workers, s)
		case p.Role == srtlaunch.RoleBenchmark:
			bs := s
			st.Benchmark = &bs
		}
	}
	st.Steps = append(keep, workers...)
	// The new workers read their engine options from this directory's /logs.
	if err := writeFiles(dir, rendered.Files); err != nil {
		return cluster.Server{}, false, err
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), st); err != nil {
		return cluster.Server{}, false, err
	}
	exited := make(chan string, len(st.Steps))
	for _, s := range workers {
		if err := ctx.Err(); err != nil {
			return cluster.Server{}, false, err
		}
		if err := b.startStep(alloc, s, simEnv(s, spec), exited); err != nil {
			return cluster.Server{}, false, err
		}
	}
	srv := cluster.Server{URL: st.URL, Handle: filepath.Base(dir), Model: rendered.ServedModel}
	return srv, true, b.waitListed(ctx, alloc, dir, workers, exited)
}

// healthBudget is the recipe's health-check budget, or the bring-up's
// shorter one (cluster.ServeSpec.HealthBudget), in seconds.
func healthBudget(recipe time.Duration, spec cluster.ServeSpec) float64 {
	if spec.HealthBudget > 0 && (recipe <= 0 || spec.HealthBudget < recipe) {
		return spec.HealthBudget.Seconds()
	}
	return recipe.Seconds()
}

// simEnv is what a simulator role of this bring-up adds to its
// environment: the spec's SWEEPFLOW_SIM_* settings (a chaos run's crash of
// one bring-up); a real engine's step gets none.
func simEnv(s step, spec cluster.ServeSpec) []kv {
	if s.SimRole == "" {
		return nil
	}
	var out []kv
	for _, k := range sortedKeys(spec.Env) {
		if strings.HasPrefix(k, "SWEEPFLOW_SIM_") {
			out = append(out, kv{k, spec.Env[k]})
		}
	}
	return out
}

// latestServeDir is the job's most recent bring-up directory ("" if none).
func latestServeDir(workDir string) string {
	entries, _ := os.ReadDir(workDir)
	n := 0
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "serve-")); err == nil && v > n {
			n = v
		}
	}
	if n == 0 {
		return ""
	}
	return filepath.Join(workDir, fmt.Sprintf("serve-%d", n))
}

// waitUnregistered waits until the frontend's /health lists no worker.
func (b *Backend) waitUnregistered(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p, d, err := frontendWorkers(ctx, url, "dynamo")
		if err == nil && p == 0 && d == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d prefill and %d decode workers still registered", p, d)
			}
			return fmt.Errorf("frontend %s after %s: %v", url, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// frontendWorkers reads the registered workers as srt-slurm does: a dynamo
// frontend's /health, an SGLang router's /workers (frontend "sglang"), or
// a direct vLLM server's /v1/models (frontend "vllm": its one aggregate
// worker is up once a model is listed, check_vllm_health).
func frontendWorkers(ctx context.Context, url, frontend string) (prefill, decode int, err error) {
	path := "/health"
	switch frontend {
	case "sglang":
		path = "/workers"
	case "vllm":
		path = "/v1/models"
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("frontend %s: HTTP %d", path, resp.StatusCode)
	}
	switch frontend {
	case "sglang":
		return srtlaunch.RouterWorkers(body)
	case "vllm":
		var models struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &models); err != nil {
			return 0, 0, fmt.Errorf("vllm /v1/models: %v", err)
		}
		return 0, min(len(models.Data), 1), nil
	}
	h, err := srtlaunch.ParseFrontendHealth(body)
	if err != nil {
		return 0, 0, err
	}
	p, d := h.Workers()
	return p, d, nil
}
