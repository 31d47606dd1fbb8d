package nightly

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/prereq"
)

// TestGitSourceFollowsRef plans from a git checkout: each run resolves the
// ref to its commit, so a commit that changes the image is picked up, and
// a commit that breaks the check is reported instead of planned.
func TestGitSourceFollowsRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		prereq.Missing(t, "git not installed")
	}
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	run("init", "-q")
	orig, err := os.ReadFile(filepath.Join(repo, "configs", "dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), orig, 0o644))
	sweep := strings.Join([]string{"name: git-test", "config-files: [master.yaml]",
		"runner-config: " + filepath.Join(repo, "configs", "runners.yaml"),
		"config-keys: [dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg]",
		"cluster: " + filepath.Join(repo, "configs", "clusters", "local-sim.yaml"),
		"recipes-root: " + filepath.Join(repo, "configs"), ""}, "\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sweeps"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sweeps", "s.yaml"), []byte(strings.ReplaceAll(sweep, "[master.yaml]", "[../master.yaml]")), 0o644))
	run("add", "-A")
	run("commit", "-qm", "one")

	src := Source{SweepFile: "sweeps/s.yaml", GitDir: dir, GitRef: "HEAD"}
	scratch := t.TempDir()
	r1, err := PlanSource(context.Background(), src, scratch)
	require.NoError(t, err)
	require.Empty(t, r1.Failures)
	require.Len(t, r1.Plan.Points, 2)
	assert.Equal(t, "lmsysorg/sglang:nightly-dev-20260916-c9a8fba9", r1.Plan.Points[0].Image)

	bumped := strings.Replace(string(orig), "nightly-dev-20260916-c9a8fba9", "nightly-dev-20261001-0a1b2c3d", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(bumped), 0o644))
	run("commit", "-qam", "bump")
	r2, err := PlanSource(context.Background(), src, scratch)
	require.NoError(t, err)
	assert.NotEqual(t, r1.Commit, r2.Commit)
	assert.Equal(t, "lmsysorg/sglang:nightly-dev-20261001-0a1b2c3d", r2.Plan.Points[0].Image)
	assert.Equal(t, r1.Plan.Points[0].BaselineKey, r2.Plan.Points[0].BaselineKey, "same identity apart from the image")

	// The pinned first commit still plans the old image.
	old, err := PlanSource(context.Background(), Source{SweepFile: "sweeps/s.yaml", GitDir: dir, GitRef: r1.Commit}, scratch)
	require.NoError(t, err)
	assert.Equal(t, r1.Plan.Points[0].Image, old.Plan.Points[0].Image)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(strings.Replace(bumped, "lmsysorg/sglang:nightly-dev-20261001-0a1b2c3d", "registry.example.com/sglang:patched", 1)), 0o644))
	run("commit", "-qam", "patched image")
	r3, err := PlanSource(context.Background(), src, scratch)
	require.NoError(t, err)
	require.NotEmpty(t, r3.Failures)
	assert.True(t, strings.HasPrefix(r3.Failures[0], "upstream-image "), r3.Failures[0])
	assert.Nil(t, r3.Plan)

	_, err = PlanSource(context.Background(), Source{SweepFile: "sweeps/s.yaml", GitDir: dir, GitRef: "no-such-ref"}, scratch)
	assert.ErrorContains(t, err, "no-such-ref")
}
