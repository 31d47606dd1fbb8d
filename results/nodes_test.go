package results

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
)

// TestNodeFaults: a fault is written once per key (a retried activity
// counts once), read per cluster and window, and a clear takes a node back
// out of the excluded list.
func TestNodeFaults(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s, _ := be.open(t)
		ctx := context.Background()
		now := time.Now().Truncate(time.Microsecond)
		xid := func(key, cluster, node string, ago time.Duration) nodehealth.Fault {
			return nodehealth.Fault{Key: key, Cluster: cluster, Node: node, Class: failure.GPUXid, Excerpt: "NVRM: Xid 79 on " + node,
				WorkflowID: "s/p", Stage: "bring-up", JobID: "7", At: now.Add(-ago)}
		}
		require.NoError(t, s.PutNodeFault(ctx, xid("a#1@n1", "emu", "n1", 2*time.Hour)))
		require.NoError(t, s.PutNodeFault(ctx, xid("a#1@n1", "emu", "n1", time.Hour)), "same key: a no-op")
		require.NoError(t, s.PutNodeFault(ctx, xid("a#2@n1", "emu", "n1", time.Hour)))
		require.NoError(t, s.PutNodeFault(ctx, xid("a#2@n2", "emu", "n2", time.Hour)))
		require.NoError(t, s.PutNodeFault(ctx, xid("b#1@n1", "other", "n1", time.Hour)))
		require.NoError(t, s.PutNodeFault(ctx, xid("a#0@n1", "emu", "n1", 48*time.Hour)))
		require.Error(t, s.PutNodeFault(ctx, nodehealth.Fault{Cluster: "emu", Node: "n1", At: now}), "no key")

		got, err := s.NodeFaults(ctx, "emu", now.Add(-24*time.Hour))
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, xid("a#1@n1", "emu", "n1", 2*time.Hour), got[0], "the first write of a key stays")
		all, err := s.NodeFaults(ctx, "", now.Add(-24*time.Hour))
		require.NoError(t, err)
		assert.Len(t, all, 4)

		nodes, err := s.NodeHealth(ctx, "emu", nodehealth.DefaultPolicy, now)
		require.NoError(t, err)
		assert.Equal(t, []string{"n1"}, nodehealth.ExcludedNodes(nodes))
		require.Len(t, nodes, 2)
		assert.Equal(t, nodehealth.Suspect, nodes[1].Verdict)

		require.NoError(t, s.PutNodeClear(ctx, nodehealth.Clear{Cluster: "emu", Node: "n1", At: now, By: "ops"}))
		clears, err := s.NodeClears(ctx, "emu")
		require.NoError(t, err)
		assert.Equal(t, []nodehealth.Clear{{Cluster: "emu", Node: "n1", At: now, By: "ops"}}, clears)
		nodes, err = s.NodeHealth(ctx, "emu", nodehealth.DefaultPolicy, now)
		require.NoError(t, err)
		assert.Empty(t, nodehealth.ExcludedNodes(nodes), "cleared")
		other, err := s.NodeHealth(ctx, "other", nodehealth.Policy{Attempts: 1, Window: time.Hour * 24}, now)
		require.NoError(t, err)
		assert.Equal(t, []string{"n1"}, nodehealth.ExcludedNodes(other), "a clear on one cluster leaves another's node of the same name")
	})
}
