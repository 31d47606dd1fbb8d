package nightly

// Re-planning: every night re-reads the sweep's files from where the
// schedule names them (a path, or a git checkout at a ref), runs the
// reviewer checklist over them and plans the sweep again, so the night runs
// what the configs say that night rather than what they said when the
// schedule was created.

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan"
)

// Source says where a schedule's sweep files live. Without GitDir,
// SweepFile (and ClusterFile) are paths on the worker; with it, they are
// relative to the repository root and read at GitRef (default HEAD).
type Source struct {
	SweepFile   string   `json:"sweep_file"`
	ClusterFile string   `json:"cluster_file,omitempty"`
	GitDir      string   `json:"git_dir,omitempty"`
	GitRef      string   `json:"git_ref,omitempty"`
	Allow       []string `json:"allow,omitempty"` // check rules waived
}

// SourcePlan is one night's plan, or why there is none.
type SourcePlan struct {
	Sweep   *config.Sweep
	Cluster *config.Cluster
	Plan    *plan.Plan
	Report  *checklist.Report
	// Commit is the commit GitRef resolved to ("" for a path source).
	Commit string
	// Failures are the check findings (and unreadable or invalid inputs)
	// that stop tonight's points from running; empty when the plan is good.
	Failures []string
}

// PlanSource reads, checks and plans the source. scratch is a directory it may
// use for a git export. Errors are infrastructure problems worth a retry
// (git failing); a bad config or a failing check is a SourcePlan with
// Failures.
func PlanSource(ctx context.Context, src Source, scratch string) (*SourcePlan, error) {
	res := &SourcePlan{}
	sweepFile, clusterFile := src.SweepFile, src.ClusterFile
	if src.GitDir != "" {
		ref := src.GitRef
		if ref == "" {
			ref = "HEAD"
		}
		commit, err := git(ctx, src.GitDir, "rev-parse", "--verify", ref+"^{commit}")
		if err != nil {
			return nil, err
		}
		res.Commit = strings.TrimSpace(string(commit))
		dir := filepath.Join(scratch, res.Commit)
		if err := export(ctx, src.GitDir, res.Commit, dir); err != nil {
			return nil, err
		}
		sweepFile = filepath.Join(dir, filepath.FromSlash(src.SweepFile))
		if clusterFile != "" && !filepath.IsAbs(clusterFile) {
			clusterFile = filepath.Join(dir, filepath.FromSlash(clusterFile))
		}
	}
	fail := func(err error) (*SourcePlan, error) {
		res.Failures = append(res.Failures, errtext.FirstLine(err))
		return res, nil
	}
	sw, err := config.LoadSweep(sweepFile)
	if err != nil {
		return fail(err)
	}
	res.Sweep = sw
	if clusterFile == "" {
		clusterFile = sw.ClusterPath
	}
	cl, err := config.LoadCluster(clusterFile)
	if err != nil {
		return fail(err)
	}
	res.Cluster = cl
	opts := checklist.Options{ConfigFiles: sw.ConfigFiles, RunnerConfig: sw.RunnerConfig, ConfigKeys: sw.ConfigKeys,
		Inject: sw.GoldenAL, Thinking: sw.Thinking, RecipesRoot: sw.RecipesRoot}
	if opts.RecipesRoot == "" {
		opts.RecipesRoot = cl.RecipesRoot
	}
	rep, err := checklist.Check(opts)
	if err != nil {
		return fail(err)
	}
	rep.Allow(src.Allow)
	res.Report = rep
	for _, f := range rep.Findings {
		if !f.Allowed {
			res.Failures = append(res.Failures, f.String())
		}
	}
	if len(res.Failures) > 0 {
		return res, nil
	}
	p, err := plan.Build(plan.Options{Sweep: sw, Cluster: cl})
	if err != nil {
		return fail(err)
	}
	res.Plan = p
	return res, nil
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git -C %s %s: %v: %s", dir, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// export writes the tree of commit into dir (once: a commit never changes).
func export(ctx context.Context, repo, commit, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, ".sweepflow-export")); err == nil {
		return nil
	}
	data, err := git(ctx, repo, "archive", "--format=tar", commit)
	if err != nil {
		return err
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("git archive %s: %w", commit, err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(tmp, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".sweepflow-export"), []byte(commit+"\n"), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(dir)
	return os.Rename(tmp, dir)
}
