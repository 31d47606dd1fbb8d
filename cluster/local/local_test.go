package local

import (
	"context"
	"path/filepath"
	"strconv"
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
