package nodehealth_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
)

func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	f := func(node string, c failure.Class, ago time.Duration) nodehealth.Fault {
		return nodehealth.Fault{Cluster: "gb200", Node: node, Class: c, At: at(ago), Excerpt: string(c) + " on " + node}
	}
	faults := []nodehealth.Fault{
		f("gb200-07", failure.GPUXid, 3*time.Hour),
		f("gb200-07", failure.NCCL, time.Hour), // second hardware-like attempt: excluded
		f("gb200-03", failure.NodeFail, 2*time.Hour),
		f("gb200-03", failure.NVLink, 30*time.Hour),    // outside the 24 h window
		f("gb200-05", failure.CUDAOOM, time.Hour),      // not hardware: the recipe's memory, not the node
		f("gb200-05", failure.HealthBudget, time.Hour), // not hardware either
		f("gb200-09", failure.GPUXid, 5*time.Hour),
		f("gb200-09", failure.GPUXid, 4*time.Hour), // cleared after this one
		f("gb200-11", failure.GPUXid, 2*time.Hour),
		f("gb200-11", failure.GPUXid, time.Hour),
	}
	clears := []nodehealth.Clear{
		{Cluster: "gb200", Node: "gb200-09", At: at(90 * time.Minute)},
		{Cluster: "gb200", Node: "gb200-11", At: at(3 * time.Hour)}, // before both faults: still excluded
	}
	got := nodehealth.Judge(nodehealth.DefaultPolicy, faults, clears, now)
	var summary []string
	for _, n := range got {
		summary = append(summary, n.Node+" "+string(n.Verdict))
	}
	assert.Equal(t, []string{"gb200-07 excluded", "gb200-11 excluded", "gb200-03 suspect"}, summary)
	assert.Equal(t, []string{"gb200-07", "gb200-11"}, nodehealth.ExcludedNodes(got))
	assert.Equal(t, failure.NCCL, got[0].Faults[0].Class, "newest evidence first")
	assert.Equal(t, at(3*time.Hour), got[1].ClearedAt)

	// attempts 3: two are only suspects; attempts 0: nobody is excluded.
	three := nodehealth.Judge(nodehealth.Policy{Attempts: 3, Window: 24 * time.Hour}, faults, clears, now)
	assert.Empty(t, nodehealth.ExcludedNodes(three))
	assert.Len(t, three, 3)
	assert.Empty(t, nodehealth.ExcludedNodes(nodehealth.Judge(nodehealth.Policy{Window: 24 * time.Hour}, faults, nil, now)))
	// A window of 90 min keeps only gb200-07's NCCL and gb200-11's second Xid.
	short := nodehealth.Judge(nodehealth.Policy{Attempts: 2, Window: 90 * time.Minute}, faults, clears, now)
	assert.Empty(t, nodehealth.ExcludedNodes(short))

	// Another cluster's node of the same name is another node.
	other := f("gb200-03", failure.NodeFail, time.Hour)
	other.Cluster = "gb300"
	both := nodehealth.Judge(nodehealth.DefaultPolicy, append(faults, other), clears, now)
	assert.Equal(t, []string{"gb200-07", "gb200-11"}, nodehealth.ExcludedNodes(both))
	assert.Len(t, both, 4)
}

func TestFaultsFromEvidence(t *testing.T) {
	base := errors.New("worker exited")
	xid := failure.WithNodes(failure.Wrap(base, failure.GPUXid, "Dec  5 03:12:01 gb200-07 kernel: NVRM: Xid (PCI:0000:1b:00): 79"), "gb200-07")
	got := nodehealth.Faults(xid)
	require.Len(t, got, 1)
	assert.Equal(t, "gb200-07", got[0].Node)
	assert.Equal(t, failure.GPUXid, got[0].Class)
	assert.Contains(t, got[0].Excerpt, "NVRM: Xid")

	// A CUDA OOM names no node's fault even when it names the node.
	oom := failure.WithNodes(failure.Wrap(base, failure.CUDAOOM, "gb200-07: CUDA out of memory"), "gb200-07")
	assert.Empty(t, nodehealth.Faults(oom))
	// Hardware-like evidence that names no node charges nobody.
	assert.Empty(t, nodehealth.Faults(failure.Wrap(base, failure.NCCL, "NCCL WARN")))
	assert.Empty(t, nodehealth.Faults(base))

	down := failure.WithNodes(failure.Wrap(base, failure.NodeFail, "slurm job 7 is NODE_FAIL"), "gb200-02", "gb200-03")
	assert.Len(t, nodehealth.Faults(down), 2)
}

func TestPolicy(t *testing.T) {
	require.NoError(t, nodehealth.DefaultPolicy.Validate())
	assert.Error(t, nodehealth.Policy{Attempts: -1, Window: time.Hour}.Validate())
	assert.Error(t, nodehealth.Policy{Attempts: 2}.Validate())
	assert.Contains(t, nodehealth.DefaultPolicy.String(), "2 failed attempts")
	assert.Contains(t, nodehealth.DefaultPolicy.String(), "24h0m0s")
}

func TestWriteTextAndJSON(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	faults := []nodehealth.Fault{
		{Cluster: "slurm-emu", Node: "gb200-01", Class: failure.GPUXid, Excerpt: "NVRM: Xid 79", WorkflowID: "s/p", Stage: "bring-up", JobID: "12", At: now.Add(-time.Hour)},
		{Cluster: "slurm-emu", Node: "gb200-01", Class: failure.GPUXid, Excerpt: "NVRM: Xid 79 again", WorkflowID: "s/p", Stage: "bring-up", JobID: "12", At: now.Add(-time.Minute)},
	}
	nodes := nodehealth.Judge(nodehealth.DefaultPolicy, faults, nil, now)
	var b bytes.Buffer
	require.NoError(t, nodehealth.WriteText(&b, nodehealth.DefaultPolicy, nodes))
	out := b.String()
	assert.Regexp(t, `gb200-01\s+slurm-emu\s+excluded\s+2\s+2026-12-05 11:59:00`, out)
	assert.Contains(t, out, "gpu-xid  s/p bring-up, slurm job 12\n    NVRM: Xid 79 again")
	assert.Contains(t, out, "policy: a node named in 2 failed attempts")

	b.Reset()
	require.NoError(t, nodehealth.WriteJSON(&b, nodehealth.DefaultPolicy, nodes))
	var got struct {
		Policy struct {
			Attempts int     `json:"attempts"`
			Window   float64 `json:"window_hours"`
		} `json:"policy"`
		Nodes []struct {
			Node    string `json:"node"`
			Verdict string `json:"verdict"`
			Faults  []struct {
				Class string `json:"class"`
			} `json:"faults"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	assert.Equal(t, 2, got.Policy.Attempts)
	assert.Equal(t, 24.0, got.Policy.Window)
	require.Len(t, got.Nodes, 1)
	assert.Equal(t, "excluded", got.Nodes[0].Verdict)
	assert.Len(t, got.Nodes[0].Faults, 2)

	b.Reset()
	require.NoError(t, nodehealth.WriteText(&b, nodehealth.DefaultPolicy, nil))
	assert.Contains(t, b.String(), "no node has a hardware-like failure that counts")
}
