package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a running process a chaos run kills and starts again (the
// worker, the embedded Temporal server): found by its pid or a pid file,
// and started again as it was, from what /proc says of it: its command
// line, environment and working directory, its output appended to the file
// it wrote to. A pid file is rewritten with the new pid.
type Process struct {
	Name    string
	PidFile string // "" when named by pid
	pid     int
	argv    []string
	env     []string
	dir     string
	out     string // the regular file its stdout went to ("" for none)
	waited  chan struct{}
}

// OpenProcess finds the process ref names: a pid, or a file holding one.
func OpenProcess(name, ref string) (*Process, error) {
	p := &Process{Name: name}
	pid, err := strconv.Atoi(strings.TrimSpace(ref))
	if err != nil {
		b, rerr := os.ReadFile(ref)
		if rerr != nil {
			return nil, fmt.Errorf("%s: %q is neither a pid nor a readable pid file: %v", name, ref, rerr)
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return nil, fmt.Errorf("%s: pid file %s holds %q, not a pid", name, ref, strings.TrimSpace(string(b)))
		}
		p.PidFile = ref
	}
	if err := p.read(pid); err != nil {
		return nil, err
	}
	return p, nil
}

// read takes pid's command line, environment, directory and output.
func (p *Process) read(pid int) error {
	if !alive(pid) {
		return fmt.Errorf("%s: no process %d runs", p.Name, pid)
	}
	proc := fmt.Sprintf("/proc/%d/", pid)
	cmdline, err := os.ReadFile(proc + "cmdline")
	if err != nil {
		return fmt.Errorf("%s: reading process %d: %v", p.Name, pid, err)
	}
	environ, err := os.ReadFile(proc + "environ")
	if err != nil {
		return fmt.Errorf("%s: reading process %d's environment (the chaos run must run as its user or root): %v", p.Name, pid, err)
	}
	dir, err := os.Readlink(proc + "cwd")
	if err != nil {
		return fmt.Errorf("%s: reading process %d's directory: %v", p.Name, pid, err)
	}
	p.pid, p.dir = pid, dir
	p.argv = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	p.env = nil
	for _, e := range strings.Split(string(environ), "\x00") {
		if e != "" {
			p.env = append(p.env, e)
		}
	}
	if out, err := os.Readlink(proc + "fd/1"); err == nil && filepath.IsAbs(out) {
		if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
			p.out = out
		}
	}
	return nil
}

// Pid is the process's current pid.
func (p *Process) Pid() int { return p.pid }

// alive: the process runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "\nState:\tZ")
}

// Stop sends sig and waits up to grace for the process to end, then kills
// it.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	if err := syscall.Kill(p.pid, sig); err != nil && alive(p.pid) {
		return fmt.Errorf("%s: signalling %d: %v", p.Name, p.pid, err)
	}
	deadline := time.Now().Add(grace)
	for alive(p.pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
			grace = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.waited != nil {
		<-p.waited
	}
	return nil
}

// Start starts the process again as it was, in a session of its own, and
// rewrites its pid file.
func (p *Process) Start() error {
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if p.out != "" {
		f, err := os.OpenFile(p.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("%s: reopening its output %s: %v", p.Name, p.out, err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: starting %s again: %v", p.Name, p.argv[0], err)
	}
	p.pid = cmd.Process.Pid
	p.waited = make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(p.waited)
	if p.PidFile != "" {
		if err := os.WriteFile(p.PidFile, []byte(strconv.Itoa(p.pid)), 0o644); err != nil {
			return fmt.Errorf("%s: rewriting %s: %v", p.Name, p.PidFile, err)
		}
	}
	return nil
}
