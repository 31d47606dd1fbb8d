// Package slurmemu gives tests the emulated 18-node GB200 Slurm partition of
// scripts/slurm-emu.sh: real slurmctld and slurmd daemons on this machine.
// Test binaries share it one at a time through a file lock, and the binary
// that started it stops it when its test ends.
package slurmemu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

// Partition is the running emulation.
type Partition struct {
	Conf  string // SLURM_CONF of the emulation (also set in the environment)
	Name  string // partition name
	Nodes int
	root  string
}

// lockPath serialises the test binaries that use the emulation (its ports
// are fixed). It lives outside the emulation's directory, which stop removes.
const lockPath = "/tmp/sweepflow-slurm-emu.lock"

func emuDir() string {
	if d := os.Getenv("SWEEPFLOW_SLURM_EMU_DIR"); d != "" {
		return d
	}
	return "/tmp/sweepflow-slurm-emu"
}

// RepoRoot finds the repository root (the directory holding go.mod) above
// the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("slurmemu: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start brings the emulated partition up for t (or joins one that runs) and
// sets SLURM_CONF for the Slurm commands this process runs. Without Slurm it
// skips the test, unless CI=true, where the emulation must start. The
// emulation is stopped when t ends if this call started it.
func Start(t testing.TB) *Partition {
	t.Helper()
	if _, err := exec.LookPath("slurmctld"); err != nil {
		prereq.Missing(t, "Slurm is not installed (Debian packages slurmctld slurmd slurm-client munge; scripts/slurm-emu.sh start installs them): skipping the emulated-partition test")
	}
	if os.Geteuid() != 0 {
		prereq.Missing(t, "the emulated Slurm partition needs root (slurmd): skipping")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "slurm-emu.sh")

	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("slurmemu: %v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("slurmemu: lock %s: %v", lockPath, err)
	}
	unlock := func() {
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	}
	// Ours to stop: an emulation this call starts (slurm-emu.sh start
	// starts clean when no slurmctld of it lives: a killed run's leftovers
	// go first), or one a crashed test binary left behind (it wrote "test"
	// as the owner). One a developer started (the demo) is joined and left
	// running, which the test says in one line.
	started := exec.Command(script, "status").Run() != nil
	if owner, err := os.ReadFile(filepath.Join(emuDir(), "owner")); err == nil && strings.TrimSpace(string(owner)) == "test" {
		started = true
	}
	if !started {
		owner, _ := exec.Command(script, "owner").Output()
		t.Logf("the emulated Slurm partition at %s belongs to %s: joining it, leaving it running", emuDir(), strings.TrimSpace(string(owner)))
	}
	t0 := time.Now()
	start := exec.Command(script, "start")
	start.Env = append(os.Environ(), "SWEEPFLOW_SLURM_EMU_OWNER=test")
	out, err := start.CombinedOutput()
	if err != nil {
		unlock()
		t.Fatalf("the emulated Slurm partition did not start: %v\n%s", err, out)
	}
	envOut, err := exec.Command(script, "env").Output()
	if err != nil {
		unlock()
		t.Fatalf("slurm-emu.sh env: %v", err)
	}
	conf := strings.TrimPrefix(strings.TrimSpace(string(envOut)), "export SLURM_CONF=")
	old, had := os.LookupEnv("SLURM_CONF")
	os.Setenv("SLURM_CONF", conf)
	if started {
		// Jobs a crashed test binary left behind hold nodes: clear them.
		_ = exec.Command("scancel", "--partition", "gb200").Run()
	}
	t.Logf("emulated Slurm partition ready in %s (started here: %v)", time.Since(t0).Round(time.Millisecond), started)
	t.Cleanup(func() {
		if started {
			if out, err := exec.Command(script, "stop").CombinedOutput(); err != nil {
				t.Errorf("slurm-emu.sh stop: %v\n%s", err, out)
			}
		}
		if had {
			os.Setenv("SLURM_CONF", old)
		} else {
			os.Unsetenv("SLURM_CONF")
		}
		unlock()
	})
	return &Partition{Conf: conf, Name: "gb200", Nodes: 18, root: root}
}

// Squeue returns the jobs Slurm still lists as pending or running.
func (p *Partition) Squeue(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-o", "%i %j %T %r").CombinedOutput()
	if err != nil {
		t.Fatalf("squeue: %v: %s", err, out)
	}
	var jobs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			jobs = append(jobs, l)
		}
	}
	return jobs
}

// Run runs a Slurm command (scancel, scontrol, sbatch) and fails t on error.
func (p *Partition) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Hold submits a job that holds n whole nodes (to make other jobs queue) and
// returns its id; the caller scancels it.
func (p *Partition) Hold(t testing.TB, n int) string {
	t.Helper()
	out := p.Run(t, "sbatch", "--parsable", "--job-name", "slurmemu-hold", "--nodes", fmt.Sprint(n), "--exclusive",
		"--no-requeue", "--time", "10:00", "--output", "/dev/null", "--wrap", "exec sleep infinity")
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	return id
}

// RequireRoles fails t unless this build has a simulator role for every
// entry point of the emulated profile (configs/clusters/slurm-emu.yaml).
// The test binary links the same simrole package as the starter it runs,
// so the build, not a command's help text, says which roles exist; a
// missing one is a defect, never a skip.
func RequireRoles(t testing.TB) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkRoles(filepath.Join(root, "configs", "clusters", "slurm-emu.yaml")); err != nil {
		t.Fatal(err)
	}
}

// checkRoles says which entry point of an emulated cluster profile maps to
// a role this build does not have.
func checkRoles(profile string) error {
	c, err := config.LoadCluster(profile)
	if err != nil {
		return err
	}
	if c.Emulation == nil {
		return fmt.Errorf("%s: no emulation block", profile)
	}
	have := simrole.Roles()
	for i, e := range c.Emulation.Entrypoints {
		if !slices.Contains(have, e.Role) {
			return fmt.Errorf("%s: emulation.entrypoints[%d].role %q is not a simulator role of this build (%s)",
				profile, i, e.Role, strings.Join(have, ", "))
		}
	}
	return nil
}
