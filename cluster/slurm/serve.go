package slurm

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
)

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

var _ cluster.Backend = (*Backend)(nil)
