// Package slurm is the cluster backend for Slurm partitions such as a GB200
// NVL72 rack. A point's nodes are held by a holder job (sbatch); checkpoint
// staging and the serving processes (exactly the process set srt-slurm would
// launch, from srtlaunch.Render) run as job steps inside it (`srun --jobid
// --overlap`), so the job's exit state, not the presence of result files,
// says whether the allocation is alive.
//
// The backend shells out to the Slurm client commands (sbatch, squeue,
// scontrol, sacct, srun, scancel) of the worker's host and reads files from
// the shared filesystem, exactly as an operator on the login node would.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
)

// LauncherSbatch is how the holder job is submitted. (srt-slurm's `srtctl
// apply` was a second launcher; it ran the recipe's own stages and could not
// restart workers for eval or hand perf to sweepflow, so it was removed.)
const LauncherSbatch = "sbatch"

// ErrQueueWait marks a job that stayed pending past Config.QueueWait. It is
// wrapped together with cluster.ErrBadConfig so the point goes to the
// operator gate instead of queueing forever.
var ErrQueueWait = errors.New("queue wait timeout")

// Config sets up a Slurm backend. Paths are as the worker (login node) and
// the compute nodes see them.
type Config struct {
	Partition string
	Account   string
	// SharedRoot is on the shared filesystem; each point's job directory
	// (holder and step logs, staging resume files) is SharedRoot/jobs/<name>.
	SharedRoot string
	// NodeLocalRoot is the node-local NVMe root. "%n" in it (and in
	// checkpoint paths under it) is replaced by the node name, which gives
	// each emulated node its own directory on a one-machine partition.
	NodeLocalRoot string
	// RecipesRoot resolves recipe paths (time limit, process set).
	RecipesRoot      string
	Launcher         string // sbatch (default)
	DefaultTimeLimit time.Duration
	// QueueWait bounds how long a job may stay PENDING (0: no bound).
	QueueWait time.Duration
	// Poll is the interval of squeue polls and log scans (default 1 s).
	Poll time.Duration
	// StarterBin is the starter binary as the compute nodes see it; staging
	// runs `starter stage` on every node.
	StarterBin string
	// Launch says how the rendered process set is started.
	Launch Launch
	// JobPrefix namespaces job names (default "sweepflow").
	JobPrefix string
	// Signatures name the failure class of a role that died from its log
	// tail (nil: failure.Builtin()).
	Signatures failure.Table
}

// Backend implements cluster.Backend on a Slurm partition.
type Backend struct {
	cfg Config
}

// New validates the configuration.
func New(cfg Config) (*Backend, error) {
	if cfg.Partition == "" || cfg.SharedRoot == "" || cfg.NodeLocalRoot == "" {
		return nil, fmt.Errorf("slurm backend: partition, shared root and node-local root are required")
	}
	if cfg.Launcher == "" {
		cfg.Launcher = LauncherSbatch
	}
	if cfg.Signatures == nil {
		cfg.Signatures = failure.Builtin()
	}
	if cfg.Launcher != LauncherSbatch {
		return nil, fmt.Errorf("slurm backend: launcher %q: expected sbatch", cfg.Launcher)
	}
	if err := cfg.Launch.validate(); err != nil {
		return nil, fmt.Errorf("slurm backend: %v", err)
	}
	if cfg.StarterBin == "" {
		return nil, fmt.Errorf("slurm backend: the starter binary (for staging on the nodes) is required")
	}
	if cfg.DefaultTimeLimit <= 0 {
		cfg.DefaultTimeLimit = 6 * time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.JobPrefix == "" {
		cfg.JobPrefix = "sweepflow"
	}
	return &Backend{cfg: cfg}, nil
}

func (b *Backend) Name() string { return "slurm" }

// run executes a Slurm client command and returns its stdout; a failure
// carries stderr.
func run(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if env != nil {
		cmd.Env = env
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, clip(msg))
	}
	return out.String(), nil
}

func (b *Backend) jobDir(name string) string { return filepath.Join(b.cfg.SharedRoot, "jobs", name) }

// recipe loads the point's recipe when the profile has a recipes root,
// refusing a file outside it or one that with the point's --set overrides
// no longer resolves to what the point was planned from (digest).
func (b *Backend) recipe(path, digest string, sets []string) (*config.Recipe, error) {
	if path == "" || b.cfg.RecipesRoot == "" {
		return nil, nil
	}
	r, err := config.LoadPlannedRecipe(b.cfg.RecipesRoot, path, digest, sets...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", cluster.ErrBadConfig, err)
	}
	return r, nil
}

// Allocate submits the holder job (or finds the one a previous attempt
// submitted, by its name) and waits until it runs, reporting the pending
// reason. A job pending longer than QueueWait is cancelled and reported as
// ErrQueueWait (not retryable).
func (b *Backend) Allocate(ctx context.Context, req cluster.AllocRequest) (cluster.Allocation, error) {
	name := JobName(b.cfg.JobPrefix, req.SweepID, req.PointID)
	dir := b.jobDir(name)
	alloc := cluster.Allocation{WorkDir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return alloc, err
	}
	jobID, err := b.findActive(ctx, name, dir)
	if err != nil {
		return alloc, err
	}
	if jobID == "" {
		if jobID, err = b.submit(ctx, req, name, dir); err != nil {
			return alloc, err
		}
		if err := os.WriteFile(filepath.Join(dir, "job-id"), []byte(jobID+"\n"), 0o644); err != nil {
			b.cancel(jobID)
			return alloc, err
		}
	}
	alloc.JobID = jobID
	start := time.Now()
	for {
		e, err := b.query(ctx, jobID)
		switch {
		case err != nil && ctx.Err() == nil:
			return alloc, err
		case err == nil && e.State.Holding() && e.Nodes != "":
			nodes, err := ExpandHostlist(e.Nodes)
			if err != nil {
				return alloc, err
			}
			alloc.Nodes = nodes
			return alloc, nil
		case err == nil && e.State == StatePending:
			waited := time.Since(start).Round(time.Second)
			if req.Status != nil {
				req.Status(fmt.Sprintf("PENDING (%s): slurm job %s waiting for %d nodes in partition %s for %s", e.Reason, jobID, req.Nodes, b.cfg.Partition, waited))
			}
			if b.cfg.QueueWait > 0 && time.Since(start) > b.cfg.QueueWait {
				b.cancel(jobID)
				return alloc, fmt.Errorf("%w: %w: slurm job %s stayed PENDING (%s) for %s, longer than the queue-wait limit %s; it was cancelled",
					cluster.ErrBadConfig, ErrQueueWait, jobID, e.Reason, waited, b.cfg.QueueWait)
			}
		case err == nil && !e.State.Active():
			if serr := StateError(jobID, e.State, e.Reason); serr != nil {
				return alloc, serr
			}
			return alloc, fmt.Errorf("%w: slurm job %s ended (%s) before it ran", cluster.ErrAllocationLost, jobID, e.State)
		}
		select {
		case <-ctx.Done():
			// Nobody will tear down an allocation this activity never
			// returned: release it now.
			b.cancel(jobID)
			return alloc, ctx.Err()
		case <-time.After(b.cfg.Poll):
		}
	}
}

// findActive returns the id of a live job of this point: the one recorded
// in the job directory, else one with
// the point's job name. A retry after a crash so finds the job the crashed
// attempt submitted instead of submitting another.
func (b *Backend) findActive(ctx context.Context, name, dir string) (string, error) {
	if data, err := os.ReadFile(filepath.Join(dir, "job-id")); err == nil {
		id := strings.TrimSpace(string(data))
		if e, err := b.query(ctx, id); err == nil && e.State.Active() {
			return id, nil
		}
	}
	out, err := run(ctx, nil, "squeue", "-h", "--name", name, "-o", squeueFormat)
	if err != nil {
		return "", err
	}
	entries, err := ParseSqueue(out)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.State.Active() && e.Name == name {
			return e.JobID, nil
		}
	}
	return "", nil
}

func (b *Backend) submit(ctx context.Context, req cluster.AllocRequest, name, dir string) (string, error) {
	rec, err := b.recipe(req.RecipePath, req.RecipeDigest, req.RecipeSets)
	if err != nil {
		return "", err
	}
	limit := req.TimeLimit
	partition, account := b.cfg.Partition, b.cfg.Account
	if rec != nil {
		if limit <= 0 && rec.Slurm.TimeLimit != "" {
			if limit, err = config.ParseSlurmTime(rec.Slurm.TimeLimit); err != nil {
				return "", fmt.Errorf("%w: %s: slurm.time_limit: %v", cluster.ErrBadConfig, rec.Display, err)
			}
		}
		if rec.Slurm.Partition != "" {
			partition = rec.Slurm.Partition
		}
		if rec.Slurm.Account != "" {
			account = rec.Slurm.Account
		}
	}
	if limit <= 0 {
		limit = b.cfg.DefaultTimeLimit
	}
	args := []string{"--parsable", "--job-name", name, "--nodes", fmt.Sprint(req.Nodes), "--ntasks-per-node", "1",
		// Whole nodes, as GB200 recipes take them; no requeue, so a node
		// failure ends the job (NODE_FAIL) and the point re-allocates.
		"--exclusive", "--no-requeue", "--time", FormatTimeLimit(limit), "--partition", partition,
		"--chdir", dir, "--output", filepath.Join(dir, "holder-%j.log"),
		"--wrap", "echo holder job $SLURM_JOB_ID on $SLURM_JOB_NODELIST; exec sleep infinity"}
	if account != "" {
		args = append(args, "--account", account)
	}
	if len(req.Exclude) > 0 {
		args = append(args, "--exclude", strings.Join(req.Exclude, ","))
	}
	out, err := run(ctx, nil, "sbatch", args...)
	if err != nil {
		if len(req.Exclude) > 0 && strings.Contains(err.Error(), "Requested node configuration is not available") {
			return "", fmt.Errorf("%w: %v (bad nodes %s are excluded: `starter nodes` shows why, `starter nodes clear NAME` lets one back in)",
				cluster.ErrBadConfig, err, strings.Join(req.Exclude, ","))
		}
		if strings.Contains(err.Error(), "Requested node configuration is not available") ||
			strings.Contains(err.Error(), "invalid partition") || strings.Contains(err.Error(), "Invalid account") {
			return "", fmt.Errorf("%w: %v", cluster.ErrBadConfig, err)
		}
		return "", err
	}
	return ParseSbatch(out)
}

// query returns the job's queue entry; a job Slurm no longer lists (past
// MinJobAge) is looked up in sacct, and failing that reported lost.
func (b *Backend) query(ctx context.Context, jobID string) (QueueEntry, error) {
	out, err := run(ctx, nil, "squeue", "-h", "-j", jobID, "-t", "all", "-o", squeueFormat)
	if err == nil {
		entries, perr := ParseSqueue(out)
		if perr != nil {
			return QueueEntry{}, perr
		}
		for _, e := range entries {
			if e.JobID == jobID {
				return e, nil
			}
		}
	} else if !strings.Contains(err.Error(), "Invalid job id") {
		return QueueEntry{}, err
	}
	if out, serr := run(ctx, nil, "sacct", "-n", "-P", "-X", "-j", jobID, "-o", "JobID,State,Reason,NodeList"); serr == nil {
		if e, ok, perr := ParseSacct(jobID, out); perr == nil && ok {
			return e, nil
		}
	}
	if ctx.Err() != nil {
		return QueueEntry{}, ctx.Err()
	}
	return QueueEntry{}, fmt.Errorf("%w: slurm job %s is no longer known to Slurm", cluster.ErrAllocationLost, jobID)
}

// Check reports whether the holder job still runs, classifying how it ended.
func (b *Backend) Check(ctx context.Context, alloc cluster.Allocation) error {
	if alloc.JobID == "" {
		return fmt.Errorf("%w: no slurm job", cluster.ErrAllocationLost)
	}
	e, err := b.query(ctx, alloc.JobID)
	if err != nil {
		return err
	}
	serr := StateError(alloc.JobID, e.State, e.Reason)
	if f, ok := failure.Of(serr); ok && f.Class == failure.NodeFail {
		// The job state does not say which node failed; sinfo does.
		if bad := b.downNodes(ctx, alloc.Nodes); len(bad) > 0 {
			names := make([]string, len(bad))
			for i, n := range bad {
				names[i] = n.Name
			}
			return failure.WithNodes(failure.Amend(serr, describeNodes(bad)), names...)
		}
	}
	return serr
}

// downNodes are the nodes among nodes that sinfo reports down, drained or
// failing, with the reason an admin or slurmctld gave.
func (b *Backend) downNodes(ctx context.Context, nodes []string) []NodeState {
	if len(nodes) == 0 {
		return nil
	}
	out, err := run(ctx, nil, "sinfo", "-h", "-N", "-n", strings.Join(nodes, ","), "-o", sinfoFormat)
	if err != nil {
		return nil
	}
	var bad []NodeState
	for _, n := range ParseSinfoNodes(out) {
		if n.Bad() {
			bad = append(bad, n)
		}
	}
	return bad
}

// cancel scancels a job, ignoring the caller's cancellation.
func (b *Backend) cancel(jobID string) {
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	_, _ = run(ctx, nil, "scancel", jobID)
}

// Teardown cancels the job and waits until Slurm has released its nodes,
// so the next row's job can start. Cancelling a finished or unknown job is
// not an error.
func (b *Backend) Teardown(ctx context.Context, alloc cluster.Allocation) error {
	if alloc.JobID == "" {
		return nil
	}
	// The power collector first: it takes its last scrape and writes the
	// terminal manifest while the exporters still answer (srt-slurm
	// finalizes telemetry before its process cleanup).
	b.stopCollector(ctx, alloc)
	if _, err := run(ctx, nil, "scancel", alloc.JobID); err != nil && !strings.Contains(err.Error(), "Invalid job id") &&
		!strings.Contains(err.Error(), "already completing or completed") {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		e, err := b.query(ctx, alloc.JobID)
		if errors.Is(err, cluster.ErrAllocationLost) || (err == nil && !e.State.Active()) {
			return nil
		}
		if err != nil && ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm job %s still %s 2 minutes after scancel", alloc.JobID, e.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 2):
		}
	}
}
