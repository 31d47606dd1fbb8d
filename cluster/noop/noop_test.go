package noop

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
)

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	b := New()
	req := cluster.AllocRequest{SweepID: "s", PointID: "p1", Nodes: 3}
	a, err := b.Allocate(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"node0001", "node0002", "node0003"}, a.Nodes)
	again, err := b.Allocate(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, a, again, "a retried allocate returns the same allocation")
	assert.Equal(t, 1, b.Held())

	rep, err := b.StageCheckpoint(ctx, a, "/src", "/dst", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, cluster.StageReport{Nodes: 3}, rep)
	srv, err := b.BringUp(ctx, a, cluster.ServeSpec{})
	require.NoError(t, err)
	phase, err := b.Health(ctx, a, srv)
	require.NoError(t, err)
	assert.Equal(t, "ready", phase)
	require.NoError(t, b.Check(ctx, a))

	require.NoError(t, b.Teardown(ctx, a))
	require.NoError(t, b.Teardown(ctx, a), "teardown is idempotent")
	assert.Equal(t, 0, b.Held())
	assert.True(t, errors.Is(b.Check(ctx, a), cluster.ErrAllocationLost))
	assert.Equal(t, int64(9), b.Calls())
}

func TestErrors(t *testing.T) {
	b := New()
	tests := []struct {
		name string
		ctx  func() context.Context
		req  cluster.AllocRequest
		want error
	}{
		{"no nodes", context.Background, cluster.AllocRequest{PointID: "p", Nodes: 0}, cluster.ErrBadConfig},
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, cluster.AllocRequest{PointID: "p", Nodes: 1}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Allocate(tt.ctx(), tt.req)
			assert.ErrorIs(t, err, tt.want)
		})
	}
	assert.Equal(t, 0, b.Held())
}
