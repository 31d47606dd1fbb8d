// Package noop is a cluster backend on which every operation succeeds at
// once: allocations are names, staging copies nothing and servers are
// never started. It exists to measure orchestration alone (`starter bench
// orchestration`): with it, a sweep's time is Temporal's and the workers'.
// Nothing it returns is a measurement.
package noop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sweepflow/sweepflow/cluster"
)

// Name is the backend's name in allocations.
const Name = "noop"

// Backend answers every call at once. It counts what it was asked so a
// benchmark can check that no allocation was left held.
type Backend struct {
	mu   sync.Mutex
	held map[string]cluster.Allocation // job ID -> allocation
	// Calls counts every call, whatever the method.
	calls atomic.Int64
}

// New returns an empty backend.
func New() *Backend { return &Backend{held: map[string]cluster.Allocation{}} }

// Name implements cluster.Backend.
func (b *Backend) Name() string { return Name }

// jobID is the allocation's name: the same request gets the same job, so a
// retried Allocate does not hold two.
func jobID(req cluster.AllocRequest) string { return "noop-" + req.SweepID + "/" + req.PointID }

// Allocate holds req.Nodes named nodes (node0001, ...).
func (b *Backend) Allocate(ctx context.Context, req cluster.AllocRequest) (cluster.Allocation, error) {
	b.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return cluster.Allocation{}, err
	}
	if req.Nodes <= 0 {
		return cluster.Allocation{}, fmt.Errorf("%w: point %s asks for %d nodes", cluster.ErrBadConfig, req.PointID, req.Nodes)
	}
	id := jobID(req)
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.held[id]; ok {
		return a, nil
	}
	a := cluster.Allocation{JobID: id, Nodes: make([]string, req.Nodes)}
	for i := range a.Nodes {
		a.Nodes[i] = fmt.Sprintf("node%04d", i+1)
	}
	b.held[id] = a
	return a, nil
}

// StageCheckpoint reports every node staged with nothing copied.
func (b *Backend) StageCheckpoint(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
	b.calls.Add(1)
	return cluster.StageReport{Nodes: len(alloc.Nodes)}, ctx.Err()
}

// BringUp returns a server that is never contacted.
func (b *Backend) BringUp(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, error) {
	b.calls.Add(1)
	return cluster.Server{URL: "noop://" + alloc.JobID, Handle: alloc.JobID}, ctx.Err()
}

// Health is always ready.
func (b *Backend) Health(ctx context.Context, alloc cluster.Allocation, srv cluster.Server) (string, error) {
	b.calls.Add(1)
	return "ready", ctx.Err()
}

// Check reports the allocation alive while it is held.
func (b *Backend) Check(ctx context.Context, alloc cluster.Allocation) error {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[alloc.JobID]; !ok {
		return fmt.Errorf("%w: %s is not held", cluster.ErrAllocationLost, alloc.JobID)
	}
	return nil
}

// Teardown releases the allocation; releasing twice is fine.
func (b *Backend) Teardown(ctx context.Context, alloc cluster.Allocation) error {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, alloc.JobID)
	return nil
}

// Held is the number of allocations not torn down.
func (b *Backend) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// Calls is the number of backend calls so far.
func (b *Backend) Calls() int64 { return b.calls.Load() }

var _ cluster.Backend = (*Backend)(nil)
