package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
	"github.com/sweepflow/sweepflow/point"
)

// TestBadNodeFaults: a bring-up whose worker dies with an Xid naming a node
// charges the node in the ledger; the first attempt stays retryable, the
// one that makes the node excluded is a non-retryable AllocationLost (the
// point re-allocates instead of hitting the node again), and the next
// Allocate asks the backend to exclude it.
func TestBadNodeFaults(t *testing.T) {
	acts := newLedgerActs(t)
	acts.Cluster = "emu"
	xid := "Dec  5 03:12:01 fake-b kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus."
	xidErr := failure.WithNodes(failure.Wrap(fmt.Errorf("%w: worker of slurm job 7 exited", cluster.ErrAllocationLost),
		failure.GPUXid, xid), "fake-b")
	fb := &fakeBackend{healthErr: xidErr}
	acts.Backend = fb
	env := newActivityEnv(acts)
	p := point.Spec{SweepID: "s", PointID: "p", Nodes: 2, GPUs: 8}
	in := StageInput{Point: p, Mode: "perf", Alloc: cluster.Allocation{JobID: "7", Nodes: []string{"fake-a", "fake-b"}}}

	_, err := env.ExecuteActivity(acts.BringUp, in)
	app := appError(t, err)
	assert.Equal(t, "AllocationLost", app.Type())
	assert.False(t, app.NonRetryable(), "one Xid can be bad luck: retry on the same nodes")
	nodes, err := acts.Store.NodeHealth(context.Background(), "emu", nodehealth.DefaultPolicy, time.Now())
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, nodehealth.Suspect, nodes[0].Verdict)
	assert.Equal(t, "fake-b", nodes[0].Node)
	assert.Equal(t, failure.GPUXid, nodes[0].Faults[0].Class)
	assert.Equal(t, point.StageBringUp, nodes[0].Faults[0].Stage)
	assert.Equal(t, "7", nodes[0].Faults[0].JobID)
	assert.Contains(t, nodes[0].Faults[0].Excerpt, "NVRM: Xid")

	_, err = env.ExecuteActivity(acts.BringUp, in)
	app = appError(t, err)
	assert.Equal(t, "AllocationLost", app.Type())
	assert.True(t, app.NonRetryable(), "the node is excluded now: re-allocate")
	assert.Contains(t, app.Error(), "node fake-b is excluded now")
	var f failure.Failure
	require.NoError(t, app.Details(&f))
	assert.Equal(t, failure.GPUXid, f.Class, "the class stays the evidence's")
	assert.Equal(t, []string{"fake-b"}, f.Nodes)

	fb.healthErr = nil
	_, err = env.ExecuteActivity(acts.Allocate, p)
	require.NoError(t, err)
	assert.Equal(t, []string{"fake-b"}, fb.lastReq.Exclude)

	// A CUDA OOM names the node too, but it is the recipe's memory, not the
	// node: nothing is charged.
	acts2 := newLedgerActs(t)
	acts2.Cluster = "emu"
	acts2.Backend = &fakeBackend{healthErr: failure.WithNodes(failure.Wrap(fmt.Errorf("%w: OOM", cluster.ErrOOM), failure.CUDAOOM, "fake-b: CUDA out of memory"), "fake-b")}
	_, err = newActivityEnv(acts2).ExecuteActivity(acts2.BringUp, in)
	assert.True(t, appError(t, err).NonRetryable())
	faults, err := acts2.Store.NodeFaults(context.Background(), "", time.Time{})
	require.NoError(t, err)
	assert.Empty(t, faults)

	// Without a cluster name nothing is tracked and nothing excluded.
	acts3 := newLedgerActs(t)
	assert.Nil(t, acts3.excludedNodes(context.Background()))
	app = appError(t, acts3.nodeFailure(context.Background(), point.StageBringUp, in.Alloc, xidErr))
	assert.Equal(t, "AllocationLost", app.Type())
	assert.False(t, app.NonRetryable())
}
