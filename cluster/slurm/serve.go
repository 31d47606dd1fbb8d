package slurm

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/config"
)

// stepPrefix names the serving job steps, so a retry or the switch from the
// perf to the eval server finds and cancels them.
const stepPrefix = "sweepflow-serve-"

// endpointRe finds the frontend's address in its log.
var endpointRe = regexp.MustCompile(`listening on (https?://[^\s"']+)`)

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

// Layout assigns the allocation's nodes to serving roles as srt-slurm does:
// prefill workers on the first prefill_nodes, decode workers on the next
// decode_nodes (aggregated: agg_nodes), the frontend on the head node.
func Layout(rec *config.Recipe, nodes []string) (map[string][]string, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes to lay out", cluster.ErrAllocationLost)
	}
	l := map[string][]string{"frontend": nodes[:1]}
	if rec == nil {
		return l, nil
	}
	take := func(role string, from, n int) error {
		if n <= 0 {
			return nil
		}
		if from+n > len(nodes) {
			return fmt.Errorf("%w: %s: %s needs nodes %d-%d but the job holds %d", cluster.ErrBadConfig, rec.Display, role, from+1, from+n, len(nodes))
		}
		l[role] = nodes[from : from+n]
		return nil
	}
	res := rec.Resources
	if res.Disaggregated {
		if err := take("prefill", 0, res.PrefillNodes); err != nil {
			return nil, err
		}
		if err := take("decode", res.PrefillNodes, res.DecodeNodes); err != nil {
			return nil, err
		}
	} else if err := take("agg", 0, res.AggNodes); err != nil {
		return nil, err
	}
	return l, nil
}

// serveDir is where one bring-up's step logs go: serve-1, serve-2, ...
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

// BringUp cancels any serving steps the job already runs (a retry, or the
// perf server making way for the eval server), starts one step per role the
// recipe lays out and has a command for, and returns the frontend's address
// once its log shows it.
func (b *Backend) BringUp(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, error) {
	if err := b.Check(ctx, alloc); err != nil {
		return cluster.Server{}, err
	}
	if b.cfg.Launcher == LauncherSrtctl {
		// srt-slurm's job starts its own workers and frontend on the head node.
		if len(alloc.Nodes) == 0 {
			return cluster.Server{}, fmt.Errorf("%w: job %s holds no nodes", cluster.ErrAllocationLost, alloc.JobID)
		}
		return cluster.Server{URL: fmt.Sprintf("http://%s:%d", alloc.Nodes[0], b.cfg.FrontendPort), Handle: "srtctl"}, nil
	}
	if err := b.stopSteps(ctx, alloc); err != nil {
		return cluster.Server{}, err
	}
	rec, err := b.recipe(spec.RecipePath)
	if err != nil {
		return cluster.Server{}, err
	}
	layout, err := Layout(rec, alloc.Nodes)
	if err != nil {
		return cluster.Server{}, err
	}
	dir, err := nextServeDir(alloc.WorkDir)
	if err != nil {
		return cluster.Server{}, err
	}
	rowFile := filepath.Join(dir, "row.json")
	if err := os.WriteFile(rowFile, spec.RowJSON, 0o644); err != nil {
		return cluster.Server{}, err
	}
	env := os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	roles := make([]string, 0, len(layout))
	for role := range layout {
		if len(b.cfg.Roles[role]) > 0 {
			roles = append(roles, role)
		}
	}
	sort.Strings(roles)
	exited := make(chan string, len(roles))
	for _, role := range roles {
		nodes := layout[role]
		repl := strings.NewReplacer("{listen}", b.cfg.Listen, "{deployment}", spec.Deployment, "{model}", spec.Model,
			"{row_json_file}", rowFile, "{gpus_per_node}", strconv.Itoa(spec.GPUsPerNode), "{work_dir}", dir, "{role}", role)
		args := []string{"--jobid", alloc.JobID, "--overlap", "--nodelist", strings.Join(nodes, ","), "--nodes", strconv.Itoa(len(nodes)),
			"--ntasks-per-node", "1", "--job-name", stepPrefix + role, "--chdir", dir, "--kill-on-bad-exit=1",
			// %t (the task rank: one task per node) rather than %N, which is
			// the node's host name, the same for every emulated node.
			"--output", filepath.Join(dir, role+"-%t.log")}
		for _, a := range b.cfg.Roles[role] {
			args = append(args, repl.Replace(a))
		}
		logf, err := os.Create(filepath.Join(dir, "srun-"+role+".log"))
		if err != nil {
			return cluster.Server{}, err
		}
		// The srun client must outlive this activity (and a crashed worker):
		// killing it kills the step. Its own session keeps it out of the
		// worker's signals; scancel in teardown ends it.
		cmd := exec.Command("srun", args...)
		cmd.Stdout, cmd.Stderr, cmd.Env, cmd.Dir = logf, logf, env, dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return cluster.Server{}, fmt.Errorf("%w: srun: %v", cluster.ErrBadConfig, err)
		}
		logf.Close()
		go func() {
			_ = cmd.Wait()
			exited <- role
		}()
	}
	frontLog := filepath.Join(dir, "frontend-0.log")
	// The frontend prints its address as soon as it listens; the health
	// wait (up to hours for real engines) happens in Health, heartbeated.
	giveUp := time.After(2 * time.Minute)
	for {
		if data, err := os.ReadFile(frontLog); err == nil {
			if m := endpointRe.FindSubmatch(data); m != nil {
				return cluster.Server{URL: string(m[1]), Handle: filepath.Base(dir)}, nil
			}
		}
		select {
		case role := <-exited:
			return cluster.Server{}, b.stepDied(ctx, alloc, dir, role)
		case <-giveUp:
			return cluster.Server{}, fmt.Errorf("slurm job %s: the frontend printed no address in 2 minutes (%s)", alloc.JobID, frontLog)
		case <-ctx.Done():
			return cluster.Server{}, ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// stepDied explains a serving step that ended: the job's own state first,
// then an OOM in the logs, else a lost server.
func (b *Backend) stepDied(ctx context.Context, alloc cluster.Allocation, dir, role string) error {
	if err := b.Check(ctx, alloc); err != nil {
		return err
	}
	logs, _ := filepath.Glob(filepath.Join(dir, role+"-*.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil && oomRe.Match(data) {
			return fmt.Errorf("%w: the %s step of slurm job %s ran out of memory (%s)", cluster.ErrOOM, role, alloc.JobID, l)
		}
	}
	last := ""
	if len(logs) > 0 {
		last = tail(logs[0], 5)
	}
	if last == "" {
		last = tail(filepath.Join(dir, "srun-"+role+".log"), 5)
	}
	return fmt.Errorf("%w: the %s step of slurm job %s exited: %s", cluster.ErrAllocationLost, role, alloc.JobID, last)
}

// steps lists the job's serving steps (id -> name).
func (b *Backend) steps(ctx context.Context, alloc cluster.Allocation) (map[string]string, error) {
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
		if ok && strings.HasPrefix(name, stepPrefix) {
			steps[id] = name
		}
	}
	return steps, nil
}

func (b *Backend) stopSteps(ctx context.Context, alloc cluster.Allocation) error {
	deadline := time.Now().Add(time.Minute)
	for {
		steps, err := b.steps(ctx, alloc)
		if err != nil || len(steps) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm job %s: serving steps %v did not stop", alloc.JobID, steps)
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

// Health checks the job, then the frontend step, then the server's /health;
// the phase is the furthest log marker of this bring-up.
func (b *Backend) Health(ctx context.Context, alloc cluster.Allocation, srv cluster.Server) (string, error) {
	if err := b.Check(ctx, alloc); err != nil {
		return "job lost", err
	}
	phase := "starting"
	if srv.Handle != "srtctl" {
		dir := filepath.Join(alloc.WorkDir, srv.Handle)
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		best := -1
		for _, l := range logs {
			data, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			for i, m := range phaseMarkers {
				if i > best && m.re.Match(data) {
					best = i
				}
			}
		}
		if best >= 0 {
			phase = phaseMarkers[best].phase
		}
		steps, err := b.steps(ctx, alloc)
		if err != nil {
			return phase, err
		}
		if !mapHas(steps, stepPrefix+"frontend") {
			return "exited", b.stepDied(ctx, alloc, dir, "frontend")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return phase, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return phase, fmt.Errorf("health: HTTP %d", resp.StatusCode)
	}
	return "ready", nil
}

func mapHas(m map[string]string, v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

var _ cluster.Backend = (*Backend)(nil)
