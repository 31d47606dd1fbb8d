package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
	"github.com/sweepflow/sweepflow/results"
)

// TestNodesListAndClear: `starter nodes` lists excluded and suspect nodes
// with their evidence under the profile's policy; `starter nodes clear`
// lets one back in.
func TestNodesListAndClear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	dsn := filepath.Join(dir, "results.db")
	s, err := results.Open(ctx, dsn)
	require.NoError(t, err)
	now := time.Now()
	for i, f := range []nodehealth.Fault{
		{Node: "gb200-03", Class: failure.GPUXid, Excerpt: "Dec  5 03:12:01 gb200-03 kernel: NVRM: Xid (PCI:0000:1b:00): 79", At: now.Add(-2 * time.Hour)},
		{Node: "gb200-03", Class: failure.GPUXid, Excerpt: "Dec  5 04:12:01 gb200-03 kernel: NVRM: Xid (PCI:0000:1b:00): 79", At: now.Add(-time.Hour)},
		{Node: "gb200-07", Class: failure.NCCL, Excerpt: "gb200-07:2231:2598 [0] NCCL WARN NET/IB", At: now.Add(-time.Hour)},
	} {
		f.Cluster, f.Key, f.WorkflowID, f.Stage, f.JobID = "c1", f.Node+string(rune('a'+i)), "sw/pt", "bringup", "12"
		require.NoError(t, s.PutNodeFault(ctx, f))
	}
	require.NoError(t, s.Close())
	profile := filepath.Join(dir, "c1.yaml")
	require.NoError(t, os.WriteFile(profile, []byte(baseProfile(dir)), 0o644))

	var out bytes.Buffer
	require.NoError(t, execute(nil, newNodesCmd(), []string{"--results", dsn, "--cluster", profile}, &out, nil))
	text := out.String()
	assert.Regexp(t, `gb200-03\s+c1\s+excluded\s+2`, text)
	assert.Regexp(t, `gb200-07\s+c1\s+suspect\s+1`, text)
	assert.Contains(t, text, "gb200-07:2231:2598 [0] NCCL WARN NET/IB")
	assert.Contains(t, text, "sw/pt bringup, slurm job 12")

	// A profile that needs three attempts makes both suspects.
	strict := filepath.Join(dir, "strict.yaml")
	require.NoError(t, os.WriteFile(strict, []byte(baseProfile(dir)+"bad-nodes: {attempts: 3}\n"), 0o644))
	out.Reset()
	require.NoError(t, execute(nil, newNodesCmd(), []string{"--results", dsn, "--cluster", strict, "--json"}, &out, nil))
	var got struct {
		Nodes []struct {
			Node, Verdict string
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got.Nodes, 2)
	assert.Equal(t, "suspect", got.Nodes[0].Verdict)

	out.Reset()
	require.NoError(t, execute(nil, newNodesClearCmd(), []string{"--results", dsn, "--cluster", profile, "gb200-03"}, &out, nil))
	assert.Contains(t, out.String(), "cleared gb200-03 on c1 (was excluded)")
	out.Reset()
	require.NoError(t, execute(nil, newNodesCmd(), []string{"--results", dsn, "--cluster", profile, "--json"}, &out, nil))
	got.Nodes = nil
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got.Nodes, 1, "gb200-03 is back: %s", out.String())
	assert.Equal(t, "gb200-07", got.Nodes[0].Node)

	err = execute(nil, newNodesClearCmd(), []string{"--results", dsn, "gb200-03"}, &out, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--cluster PROFILE is required")
}

// baseProfile is a minimal local cluster profile named c1.
func baseProfile(dir string) string {
	return "name: c1\nbackend: local\nnodes: 18\ngpus-per-node: 4\ngpu-type: gb200\npartition: p\nshared-root: " + dir +
		"/shared\nnode-local-root: " + dir + "/nvme\n"
}
