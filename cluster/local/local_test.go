package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
)

// A server that dies with the worker that started it loses the allocation:
// Check says so, and the point allocates and brings up again.
func TestCheckNoticesADeadServer(t *testing.T) {
	dir := t.TempDir()
	b, err := New(Config{Root: filepath.Join(dir, "root"), Nodes: 2, SharedRoot: filepath.Join(dir, "shared"),
		NodeLocalRoot: filepath.Join(dir, "nvme"), ServeCommand: []string{"sleep", "60"}})
	require.NoError(t, err)
	ctx := context.Background()
	alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "s", PointID: "p", Nodes: 1})
	require.NoError(t, err)
	require.NoError(t, b.Check(ctx, alloc), "allocated, no server yet")

	srv, err := b.BringUp(ctx, alloc, cluster.ServeSpec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Teardown(context.Background(), alloc) })
	require.NoError(t, b.Check(ctx, alloc), "server running")

	pid, err := strconv.Atoi(srv.Handle)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 20*time.Millisecond)
	err = b.Check(ctx, alloc)
	require.ErrorIs(t, err, cluster.ErrAllocationLost)
	assert.Contains(t, err.Error(), "server process "+srv.Handle+" exited")

	require.NoError(t, b.Teardown(ctx, alloc))
	assert.ErrorIs(t, b.Check(ctx, alloc), cluster.ErrAllocationLost, "torn down: nodes released")
}

// The engine's command gets the allocation's node-local copy of the
// checkpoint ({checkpoint}: StageCheckpoint's destination on its first
// node), its listen address and its work directory.
func TestBringUpPlaceholders(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "argv")
	b, err := New(Config{Root: filepath.Join(dir, "root"), Nodes: 2, NodePrefix: "h100-", SharedRoot: filepath.Join(dir, "shared"),
		NodeLocalRoot: filepath.Join(dir, "nvme"),
		ServeCommand:  []string{"sh", "-c", `echo "$@" >` + out + `; sleep 60`, "sh", "{checkpoint}", "{model}", "{listen}", "{work_dir}/log"}})
	require.NoError(t, err)
	ctx := context.Background()
	alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "s", PointID: "p", Nodes: 1})
	require.NoError(t, err)
	srv, err := b.BringUp(ctx, alloc, cluster.ServeSpec{Model: "org/m", CheckpointPath: filepath.Join(dir, "nvme", "models", "m")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Teardown(context.Background(), alloc) })
	var got []byte
	require.Eventually(t, func() bool { got, err = os.ReadFile(out); return err == nil && len(got) > 0 }, 5*time.Second, 20*time.Millisecond)
	want := strings.Join([]string{filepath.Join(dir, "nvme", "h100-01", "models", "m"), "org/m", strings.TrimPrefix(srv.URL, "http://"), alloc.WorkDir + "/log"}, " ")
	assert.Equal(t, want+"\n", string(got))

	_, err = b.BringUp(ctx, alloc, cluster.ServeSpec{CheckpointPath: "/elsewhere/m"})
	assert.ErrorIs(t, err, cluster.ErrBadConfig, "a checkpoint outside the node-local root")
}
