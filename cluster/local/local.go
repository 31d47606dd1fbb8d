// Package local is the cluster backend that runs serving processes as child
// processes on the worker's own host. It keeps a pool of named virtual nodes
// (gb200-01 ... gb200-18) with leases in a file, so node-local checkpoint
// directories persist between points exactly as NVMe does on a real rack.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/internal/freeport"
	"github.com/sweepflow/sweepflow/staging"
)

// Config sets up a local backend.
type Config struct {
	Root          string // jobs, leases and logs live here
	Nodes         int
	NodePrefix    string // "gb200-"
	SharedRoot    string // checkpoints: SharedRoot/<model>
	NodeLocalRoot string // NodeLocalRoot/<node>/<model>
	// ServeCommand is the argv of the server. Placeholders: {listen},
	// {deployment}, {model}, {row_json_file}, {gpus_per_node}, {work_dir},
	// {checkpoint} (the first node's staged copy of the checkpoint).
	ServeCommand []string
}

// Backend implements cluster.Backend on the local host.
type Backend struct {
	cfg Config
	mu  sync.Mutex // serialises lease-file access within this process
}

// New validates the configuration.
func New(cfg Config) (*Backend, error) {
	if cfg.Root == "" || cfg.Nodes <= 0 || cfg.SharedRoot == "" || cfg.NodeLocalRoot == "" || len(cfg.ServeCommand) == 0 {
		return nil, fmt.Errorf("local backend: root, nodes, shared root, node-local root and serve command are required")
	}
	if cfg.NodePrefix == "" {
		cfg.NodePrefix = "node-"
	}
	if err := os.MkdirAll(cfg.Root, 0o755); err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg}, nil
}

func (b *Backend) Name() string { return "local" }

type leases struct {
	// Held maps a job id to the nodes it holds.
	Held map[string][]string `json:"held"`
}

// withLeases runs fn on the lease table under an exclusive file lock so
// several workers on one host never hand out the same node twice.
func (b *Backend) withLeases(fn func(l *leases) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	path := filepath.Join(b.cfg.Root, "nodes.json")
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck
	l := leases{Held: map[string][]string{}}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &l); err != nil {
			return fmt.Errorf("local backend: corrupt lease file %s: %w", path, err)
		}
		if l.Held == nil {
			l.Held = map[string][]string{}
		}
	}
	if err := fn(&l); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(l, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func jobID(sweepID, pointID string) string {
	r := strings.NewReplacer("/", "_", " ", "_")
	return r.Replace(sweepID) + "." + r.Replace(pointID)
}

// Allocate leases free nodes, lowest names first; a retry of the same point
// gets the nodes it already holds.
func (b *Backend) Allocate(ctx context.Context, req cluster.AllocRequest) (cluster.Allocation, error) {
	if req.Nodes > b.cfg.Nodes {
		return cluster.Allocation{}, fmt.Errorf("%w: point needs %d nodes, the local pool has %d", cluster.ErrBadConfig, req.Nodes, b.cfg.Nodes)
	}
	id := jobID(req.SweepID, req.PointID)
	alloc := cluster.Allocation{JobID: id, WorkDir: filepath.Join(b.cfg.Root, "jobs", id)}
	for {
		var got []string
		err := b.withLeases(func(l *leases) error {
			if held, ok := l.Held[id]; ok {
				got = held
				return nil
			}
			busy := map[string]bool{}
			for _, ns := range l.Held {
				for _, n := range ns {
					busy[n] = true
				}
			}
			var free []string
			for i := 1; i <= b.cfg.Nodes; i++ {
				n := fmt.Sprintf("%s%02d", b.cfg.NodePrefix, i)
				if !busy[n] {
					free = append(free, n)
				}
			}
			if len(free) < req.Nodes {
				return nil
			}
			got = free[:req.Nodes]
			l.Held[id] = got
			return nil
		})
		if err != nil {
			return alloc, err
		}
		if got != nil {
			alloc.Nodes = got
			return alloc, os.MkdirAll(alloc.WorkDir, 0o755)
		}
		if req.Status != nil {
			req.Status(fmt.Sprintf("pending: waiting for %d free nodes (Resources)", req.Nodes))
		}
		select {
		case <-ctx.Done():
			return alloc, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// StageCheckpoint copies the model from the shared root to every node's
// node-local root in parallel, skipping what already matches.
func (b *Backend) StageCheckpoint(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
	// Each emulated node has its own directory under the node-local root.
	rel, err := filepath.Rel(b.cfg.NodeLocalRoot, dst)
	if err != nil || strings.HasPrefix(rel, "..") {
		return cluster.StageReport{}, fmt.Errorf("%w: node-local checkpoint path %s is not under the node-local root %s", cluster.ErrBadConfig, dst, b.cfg.NodeLocalRoot)
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return cluster.StageReport{}, fmt.Errorf("%w: checkpoint %s not found on the shared root", cluster.ErrBadConfig, src)
	}
	return cluster.StageOnNodes(ctx, alloc.Nodes, func(ctx context.Context, node string) (*staging.Report, error) {
		opts := staging.Options{Src: src, Dst: filepath.Join(b.cfg.NodeLocalRoot, node, rel)}
		if done := resume[node]; len(done) > 0 {
			opts.Resume = &staging.Progress{Done: done}
		}
		opts.OnProgress = func(p staging.Progress) {
			if progress != nil {
				progress(cluster.StageProgress{Node: node, Done: p.Done, BytesCopied: p.BytesCopied})
			}
		}
		rep, err := staging.Stage(ctx, opts)
		if errors.Is(err, staging.ErrChecksumMismatch) {
			err = fmt.Errorf("%w: %v", cluster.ErrChecksum, err)
		}
		return rep, err
	})
}

// nodeCheckpoint is where StageCheckpoint put dst on the allocation's first
// node: each emulated node has its own directory under the node-local root.
func (b *Backend) nodeCheckpoint(alloc cluster.Allocation, dst string) (string, error) {
	if dst == "" || len(alloc.Nodes) == 0 {
		return dst, nil
	}
	rel, err := filepath.Rel(b.cfg.NodeLocalRoot, dst)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%w: node-local checkpoint path %s is not under the node-local root %s", cluster.ErrBadConfig, dst, b.cfg.NodeLocalRoot)
	}
	return filepath.Join(b.cfg.NodeLocalRoot, alloc.Nodes[0], rel), nil
}

func pidFile(alloc cluster.Allocation) string { return filepath.Join(alloc.WorkDir, "server.pid") }

// BringUp stops any server this allocation already runs (a retry, or the
// switch from the perf to the eval environment) and starts a new one.
func (b *Backend) BringUp(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, error) {
	if err := b.stopServer(alloc); err != nil {
		return cluster.Server{}, err
	}
	if err := os.MkdirAll(alloc.WorkDir, 0o755); err != nil {
		return cluster.Server{}, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return cluster.Server{}, err
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	rowFile := filepath.Join(alloc.WorkDir, "row.json")
	if err := os.WriteFile(rowFile, spec.RowJSON, 0o644); err != nil {
		return cluster.Server{}, err
	}
	ckpt, err := b.nodeCheckpoint(alloc, spec.CheckpointPath)
	if err != nil {
		return cluster.Server{}, err
	}
	repl := strings.NewReplacer(
		"{listen}", listen, "{deployment}", spec.Layout, "{model}", spec.Model, "{checkpoint}", ckpt,
		"{row_json_file}", rowFile, "{gpus_per_node}", strconv.Itoa(spec.GPUsPerNode), "{work_dir}", alloc.WorkDir)
	argv := make([]string, len(b.cfg.ServeCommand))
	for i, a := range b.cfg.ServeCommand {
		argv[i] = repl.Replace(a)
	}
	logf, err := os.OpenFile(filepath.Join(alloc.WorkDir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return cluster.Server{}, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = alloc.WorkDir
	// Own process group: teardown kills the whole server tree, and the server
	// outlives a crashed worker so a new worker can pick the point up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+spec.Env[k])
	}
	if err := cmd.Start(); err != nil {
		return cluster.Server{}, fmt.Errorf("%w: starting %s: %v", cluster.ErrBadConfig, argv[0], err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() //nolint:errcheck // reap the child if it exits while we live
	if err := os.WriteFile(pidFile(alloc), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return cluster.Server{}, err
	}
	return cluster.Server{URL: "http://" + listen, Handle: strconv.Itoa(pid)}, nil
}

// Health asks the server's /health endpoint and reports the last phase line
// of its log.
func (b *Backend) Health(ctx context.Context, alloc cluster.Allocation, srv cluster.Server) (string, error) {
	if pid, err := strconv.Atoi(srv.Handle); err == nil && !alive(pid) {
		return "exited", fmt.Errorf("%w: server process %d exited (see %s)", cluster.ErrAllocationLost, pid, filepath.Join(alloc.WorkDir, "server.log"))
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "starting", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "loading", fmt.Errorf("health: HTTP %d", resp.StatusCode)
	}
	return "ready", nil
}

// Check reports whether the allocation still holds its nodes and, once a
// server was started, whether it still runs. The server is the local
// allocation's job step: when it dies with the worker that started it (a
// container killed with its processes), the allocation is lost and the point
// allocates and brings up again, as after a node failure on Slurm.
func (b *Backend) Check(ctx context.Context, alloc cluster.Allocation) error {
	var held bool
	err := b.withLeases(func(l *leases) error {
		_, held = l.Held[alloc.JobID]
		return nil
	})
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: job %s no longer holds its nodes", cluster.ErrAllocationLost, alloc.JobID)
	}
	if data, err := os.ReadFile(pidFile(alloc)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && !alive(pid) {
			return fmt.Errorf("%w: job %s: server process %d exited (see %s)", cluster.ErrAllocationLost, alloc.JobID, pid,
				filepath.Join(alloc.WorkDir, "server.log"))
		}
	}
	return nil
}

// Teardown stops the server and releases the nodes. It is idempotent.
func (b *Backend) Teardown(ctx context.Context, alloc cluster.Allocation) error {
	if err := b.stopServer(alloc); err != nil {
		return err
	}
	return b.withLeases(func(l *leases) error {
		delete(l.Held, alloc.JobID)
		return nil
	})
}

func (b *Backend) stopServer(alloc cluster.Allocation) error {
	data, err := os.ReadFile(pidFile(alloc))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return os.Remove(pidFile(alloc))
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	return os.Remove(pidFile(alloc))
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the ")" that closes the command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
