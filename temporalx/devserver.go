package temporalx

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DevServer describes the embedded Temporal dev server: SQLite under a data
// directory, the UI on localhost, sweepflow's search attributes registered.
type DevServer struct {
	// Binary is sweepflow-devserver or the Temporal CLI: both take the
	// `temporal server start-dev` arguments Args builds.
	Binary  string
	DataDir string
	IP      string
	Port    int
	UIPort  int
	// SearchAttributes maps name to type (Keyword, Int, ...).
	SearchAttributes map[string]string
	// Stock runs the CLI's defaults, without TunedPragmas and
	// TunedDynamicConfig (for comparison in `starter bench orchestration`).
	Stock bool
	// Headless runs without the Web UI (UIPort is then unused).
	Headless bool
	// DynamicConfig adds KEY=JSON-VALUE dynamic config values, passed
	// after the tuned ones.
	DynamicConfig []string
	// Pragmas adds SQLite PRAGMA=VALUE settings, passed after the tuned ones.
	Pragmas []string
	// MetricsPort serves the server's Prometheus metrics there (0: none
	// with sweepflow-devserver; the CLI always serves them, on a free port).
	MetricsPort int
}

// DevServerBinary is sweepflow's build of the pinned dev server (devserver/
// in the repository, built by scripts/install-temporal.sh): the CLI's own
// server, UI and defaults, without the Prometheus endpoint the CLI always
// serves, which cost 15-25 % of its throughput on 2 cores.
const DevServerBinary = "sweepflow-devserver"

// DevServerPath finds the binary for the embedded dev server:
// $SWEEPFLOW_DEVSERVER_BIN, then bin/sweepflow-devserver walking up from
// dir. Without it, the pinned CLI does the same job, slower; own reports
// which one was found.
func DevServerPath(dir string) (path string, own bool, err error) {
	if p := os.Getenv("SWEEPFLOW_DEVSERVER_BIN"); p != "" {
		if isExec(p) {
			return p, true, nil
		}
		return "", false, fmt.Errorf("SWEEPFLOW_DEVSERVER_BIN=%s is not an executable", p)
	}
	if p, ok := inBin(dir, DevServerBinary); ok {
		return p, true, nil
	}
	p, err := CLIPath(dir)
	return p, false, err
}

// TunedPragmas are the dev server's SQLite settings: write-ahead logging
// with synchronous=NORMAL (1) commits without an fsync per transaction, the
// dev server's main cost on a small machine. A crash of the process loses
// nothing; a power loss may lose the last transactions before a checkpoint,
// acceptable for a development server (production runs on PostgreSQL).
var TunedPragmas = []string{"journal_mode=wal", "synchronous=1"}

// TunedDynamicConfig lets a workflow task hand its new activity tasks
// straight back to the worker that completed it (eager activity execution;
// the worker must serve the activity's task queue) and keeps each task
// queue in one partition, so a few pollers on one machine never miss a
// task parked on another partition.
//
// history.transferProcessorMaxPollRPS lifts the transfer queue's reader
// from 20 polls a second: at 20 a workflow task waited 25-45 ms for its
// dispatch after an activity completed even on an idle server (8.5 ms at
// the raised rate, `starter bench orchestration --parallel 1`). The reader
// polls only when told of new tasks, so the limit costs nothing when idle.
//
// system.forceSearchAttributesCacheRefreshOnRead is the Temporal CLI's own
// dev-server default (true): every search-attribute read reloaded the
// cluster metadata from SQLite, 32 reads a point (12,808 for 400 points,
// the dev server's most frequent query). Off, the cache refreshes every
// 60 s; sweepflow's attributes are given with --search-attribute and so are
// in the database before the server starts, and only an attribute created
// later (`starter server setup` on an older database) may take up to a
// minute to be usable. With it off, 400-point benches went from about 600
// to 765-780 points/min.
var TunedDynamicConfig = []string{
	"system.enableActivityEagerExecution=true",
	"matching.numTaskqueueReadPartitions=1",
	"matching.numTaskqueueWritePartitions=1",
	"history.transferProcessorMaxPollRPS=1000",
	"system.forceSearchAttributesCacheRefreshOnRead=false",
}

// Args is the `temporal server start-dev` command line.
func (d DevServer) Args() []string {
	args := []string{"server", "start-dev",
		"--ip", d.IP, "--port", strconv.Itoa(d.Port), "--ui-port", strconv.Itoa(d.UIPort),
		"--db-filename", filepath.Join(d.DataDir, "temporal.db"),
		"--log-level", "warn",
	}
	if d.Headless {
		args = append(args, "--headless")
	}
	if !d.Stock {
		for _, p := range TunedPragmas {
			args = append(args, "--sqlite-pragma", p)
		}
		for _, kv := range TunedDynamicConfig {
			args = append(args, "--dynamic-config-value", kv)
		}
	}
	for _, kv := range d.DynamicConfig {
		args = append(args, "--dynamic-config-value", kv)
	}
	for _, p := range d.Pragmas {
		args = append(args, "--sqlite-pragma", p)
	}
	if d.MetricsPort > 0 {
		args = append(args, "--metrics-port", strconv.Itoa(d.MetricsPort))
	}
	names := make([]string, 0, len(d.SearchAttributes))
	for n := range d.SearchAttributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "--search-attribute", n+"="+d.SearchAttributes[n])
	}
	return args
}

func (d DevServer) pidFile() string { return filepath.Join(d.DataDir, "temporal.pid") }

// Address is the frontend's host:port.
func (d DevServer) Address() string { return net.JoinHostPort(d.IP, strconv.Itoa(d.Port)) }

// UIURL is the Web UI's base URL.
func (d DevServer) UIURL() string { return "http://" + net.JoinHostPort(d.IP, strconv.Itoa(d.UIPort)) }

// Running returns the pid of a dev server this data directory started.
func (d DevServer) Running() (int, bool) {
	b, err := os.ReadFile(d.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

// Start launches the server in the background (its own session, so it
// outlives the command) and waits until the frontend and UI accept
// connections. It is a no-op when this data directory's server already runs.
func (d DevServer) Start(ctx context.Context) (pid int, started bool, err error) {
	if pid, ok := d.Running(); ok {
		return pid, false, nil
	}
	if err := os.MkdirAll(d.DataDir, 0o755); err != nil {
		return 0, false, err
	}
	if c, err := net.DialTimeout("tcp", d.Address(), 300*time.Millisecond); err == nil {
		c.Close()
		return 0, false, fmt.Errorf("port %d is already in use by another process (not a sweepflow dev server for %s); choose --port or stop it", d.Port, d.DataDir)
	}
	logf, err := os.OpenFile(filepath.Join(d.DataDir, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, false, err
	}
	defer logf.Close()
	cmd := exec.Command(d.Binary, d.Args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, false, fmt.Errorf("starting %s: %w", d.Binary, err)
	}
	pid = cmd.Process.Pid
	if err := os.WriteFile(d.pidFile(), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return pid, true, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	addrs := []string{d.Address()}
	if !d.Headless {
		addrs = append(addrs, net.JoinHostPort(d.IP, strconv.Itoa(d.UIPort)))
	}
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				return pid, true, fmt.Errorf("temporal dev server exited during start (%v); see %s", err, filepath.Join(d.DataDir, "temporal.log"))
			case <-ctx.Done():
				return pid, true, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return pid, true, fmt.Errorf("temporal dev server not reachable at %s after 60 s; see %s", addr, filepath.Join(d.DataDir, "temporal.log"))
			}
		}
	}
	return pid, true, nil
}

// Stop ends the server this data directory started, by pid.
func (d DevServer) Stop() error {
	pid, ok := d.Running()
	if !ok {
		_ = os.Remove(d.pidFile())
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return os.Remove(d.pidFile())
}
