package slurm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/staging"
)

// exitChecksumMismatch is `starter stage`'s exit code for a source file that
// does not match its manifest.
const exitChecksumMismatch = 3

// stageEvent is one JSON line of `starter stage --json`.
type stageEvent struct {
	Event            string            `json:"event"`
	Progress         *staging.Progress `json:"progress"`
	Report           *staging.Report   `json:"report"`
	Error            string            `json:"error"`
	ChecksumMismatch bool              `json:"checksum_mismatch"`
}

// NodePath replaces "%n" in a node-local path with the node name.
func NodePath(path, node string) string { return strings.ReplaceAll(path, "%n", node) }

// StageCheckpoint runs `starter stage` as a one-task job step on every
// allocated node at once (srun --jobid --overlap --nodelist NODE), copying
// the shared-filesystem checkpoint to the node-local path with the size +
// sha256 manifest. Files already present and matching are skipped; a node's
// resume list (from the activity's heartbeat) is handed to its step.
func (b *Backend) StageCheckpoint(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
	root := strings.TrimSuffix(b.cfg.NodeLocalRoot, "/")
	if dst != root && !strings.HasPrefix(dst, root+"/") {
		return cluster.StageReport{}, fmt.Errorf("%w: node-local checkpoint path %s is not under the node-local root %s", cluster.ErrBadConfig, dst, b.cfg.NodeLocalRoot)
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return cluster.StageReport{}, fmt.Errorf("%w: checkpoint %s not found on the shared filesystem", cluster.ErrBadConfig, src)
	}
	if len(alloc.Nodes) == 0 {
		return cluster.StageReport{}, fmt.Errorf("%w: allocation %s holds no nodes", cluster.ErrAllocationLost, alloc.JobID)
	}
	stageDir := filepath.Join(alloc.WorkDir, "stage")
	if err := os.MkdirAll(stageDir, 0o755); err != nil {
		return cluster.StageReport{}, err
	}
	report, err := cluster.StageOnNodes(ctx, alloc.Nodes, func(ctx context.Context, node string) (*staging.Report, error) {
		return b.stageNode(ctx, alloc, node, src, NodePath(dst, node), stageDir, resume[node], progress)
	})
	if err != nil {
		// A step that failed because the job died is an allocation loss,
		// whatever srun printed.
		if cerr := b.Check(ctx, alloc); cerr != nil && !errors.Is(err, cluster.ErrChecksum) {
			return report, fmt.Errorf("%w (staging: %v)", cerr, err)
		}
		return report, err
	}
	return report, nil
}

func (b *Backend) stageNode(ctx context.Context, alloc cluster.Allocation, node, src, dst, stageDir string, done []string, progress func(cluster.StageProgress)) (*staging.Report, error) {
	args := []string{"--jobid", alloc.JobID, "--overlap", "--nodelist", node, "--nodes", "1", "--ntasks", "1",
		"--job-name", "sweepflow-stage", "--quiet", "--kill-on-bad-exit=1",
		b.cfg.StarterBin, "stage", "--src", src, "--dst", dst, "--json"}
	if len(done) > 0 {
		f := filepath.Join(stageDir, node+".resume.json")
		data, _ := json.Marshal(staging.Progress{Done: done})
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--resume", f)
	}
	cmd := exec.CommandContext(ctx, "srun", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(stageDir, node+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var (
		rep      *staging.Report
		lastErr  string
		mismatch bool
	)
	sc := bufio.NewScanner(io.TeeReader(stdout, logf))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev stageEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Event {
		case "progress":
			if ev.Progress != nil && progress != nil {
				progress(cluster.StageProgress{Node: node, Done: ev.Progress.Done, BytesCopied: ev.Progress.BytesCopied})
			}
		case "report":
			rep = ev.Report
		case "error":
			lastErr, mismatch = ev.Error, ev.ChecksumMismatch
		}
	}
	werr := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case mismatch || (errors.As(werr, &exit) && exit.ExitCode() == exitChecksumMismatch):
		return nil, fmt.Errorf("%w: %s", cluster.ErrChecksum, lastErr)
	case werr != nil:
		msg := lastErr
		if msg == "" {
			msg = tail(filepath.Join(stageDir, node+".log"), 5)
		}
		return nil, fmt.Errorf("srun starter stage: %v: %s", werr, msg)
	case rep == nil:
		return nil, fmt.Errorf("srun starter stage printed no report (see %s)", filepath.Join(stageDir, node+".log"))
	}
	return rep, nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
