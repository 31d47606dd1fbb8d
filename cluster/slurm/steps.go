package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
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
