package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
	"github.com/sweepflow/sweepflow/point"
)

// excludedNodes are the cluster's nodes the bad-node policy keeps out of
// new allocations. A ledger that cannot be read excludes nothing: a lost
// exclusion costs one more failed attempt, a refused allocation a sweep.
func (a *Activities) excludedNodes(ctx context.Context) []string {
	if a.Store == nil || a.Cluster == "" {
		return nil
	}
	nodes, err := a.Store.NodeHealth(ctx, a.Cluster, a.badNodePolicy(), time.Now())
	if err != nil {
		a.log(ctx).Warn("bad nodes: reading the ledger failed; excluding none", zap.Error(err))
		return nil
	}
	return nodehealth.ExcludedNodes(nodes)
}

func (a *Activities) badNodePolicy() nodehealth.Policy {
	if a.BadNodes.Window <= 0 {
		return nodehealth.DefaultPolicy
	}
	return a.BadNodes
}

// nodeFailure classifies a failed attempt on an allocation (classify) after
// charging its hardware-like evidence to the nodes it names. When that
// makes a node of this allocation excluded, retrying on the same nodes
// would hit it again: the error becomes a non-retryable AllocationLost, and
// the point workflow re-allocates without it.
func (a *Activities) nodeFailure(ctx context.Context, stage string, alloc cluster.Allocation, err error) error {
	if err == nil {
		return nil
	}
	a.recordNodeFaults(ctx, stage, alloc, err)
	bad := slices.DeleteFunc(a.excludedNodes(ctx), func(n string) bool { return !slices.Contains(alloc.Nodes, n) })
	if len(bad) == 0 || !errors.Is(err, cluster.ErrAllocationLost) {
		return classify(err)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%v; node %s is excluded now (`starter nodes`), so the point re-allocates without it", err, strings.Join(bad, ", ")),
		string(failure.ErrAllocationLost), err, backendFailure(err))
}

// recordNodeFaults writes one fault per node err's evidence names, keyed by
// the activity attempt so a retried write counts once.
func (a *Activities) recordNodeFaults(ctx context.Context, stage string, alloc cluster.Allocation, err error) {
	faults := nodehealth.Faults(err)
	if len(faults) == 0 || a.Store == nil || a.Cluster == "" {
		return
	}
	now := time.Now()
	attempt := fmt.Sprintf("%s@%d", alloc.JobID, now.UnixNano())
	workflowID := ""
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		workflowID = info.WorkflowExecution.ID
		attempt = fmt.Sprintf("%s/%s/%s#%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	}
	for _, f := range faults {
		f.Cluster, f.WorkflowID, f.Stage, f.JobID, f.At = a.Cluster, workflowID, stage, alloc.JobID, now
		f.Key = attempt + "@" + f.Node
		if werr := a.Store.PutNodeFault(ctx, f); werr != nil {
			a.log(ctx).Warn("bad nodes: recording a fault failed", zap.String("node", f.Node), zap.Error(werr))
			continue
		}
		a.log(ctx).Warn("hardware-like failure charged to node", zap.String("node", f.Node),
			zap.String("class", string(f.Class)), zap.String("evidence", f.Excerpt))
	}
}

// allocRequest is the backend's request for p's nodes, without the
// excluded ones.
func (a *Activities) allocRequest(ctx context.Context, p point.Spec, status func(string)) cluster.AllocRequest {
	req := cluster.AllocRequest{SweepID: p.SweepID, PointID: p.PointID, Nodes: p.Nodes, RecipePath: p.RecipePath, RecipeDigest: p.RecipeDigest, RecipeSets: p.RecipeSets, Status: status}
	if req.Exclude = a.excludedNodes(ctx); len(req.Exclude) > 0 {
		a.log(ctx).Info("allocating without bad nodes", zap.Strings("excluded", req.Exclude))
	}
	return req
}
