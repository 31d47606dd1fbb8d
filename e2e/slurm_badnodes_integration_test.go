package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// TestSlurmBadNode (issue 27, bad nodes): on the emulated partition one
// node's worker roles die with a GPU Xid line naming the node
// (SWEEPFLOW_SIM_CRASH=gpu-xid@node=...). The point's first allocation gets
// that node; its bring-up fails twice on it, which excludes the node
// (default policy: 2 attempts within 24 h); the point re-allocates with
// sbatch --exclude, gets other nodes, and the sweep completes. `starter
// nodes` lists the node as excluded with the Xid lines as its evidence, and
// `starter nodes clear` lets it back in.
func TestSlurmBadNode(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	part := slurmemu.Start(t)
	e := newITEnv(t)
	slurmemu.RequireRoles(t)
	const profile = "../configs/clusters/slurm-emu.yaml"
	out, err := exec.Command(e.starterBin, "sim", "checkpoint", "--dir",
		e.home+"/slurm-emu/shared/models/DeepSeek-V4-Pro-0813", "--shards", "3", "--shard-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))

	// The partition is idle, so Slurm gives a 2-node job its first nodes.
	nodes := strings.Fields(part.Run(t, "sinfo", "-h", "-N", "-p", part.Name, "-o", "%N"))
	require.NotEmpty(t, nodes)
	victim := nodes[0]

	cfg := e.workerConfig()
	cfg.ClusterFile = profile
	cfg.PerfDuration = 4 * time.Second
	cfg.SimCrash = "gpu-xid@node=" + victim
	e.startWorkerWith(e.c, cfg)

	const tp8c1 = "dsv4_p1x8_d0x8_conc1_kvdram-hicache" // 2 nodes
	in := slurmSweep(t, "../configs/sweeps/dsv4-gb200-agentx.yaml", profile, "slurm-badnode", tp8c1)
	pts := in.Points
	e.start(in)
	pr := e.wait(in.SweepID, 8*time.Minute)
	require.Equal(t, 1, pr.Counts[point.StatusCompleted], "the sweep completes on other nodes: %+v", pr)

	// Every holder job of the point, in submission order, with its nodes
	// (the holder's first log line).
	jobDir := filepath.Join(e.home, "slurm-emu", "shared", "jobs", slurm.JobName("sweepflow", in.SweepID, pts[0].PointID))
	logs, err := filepath.Glob(filepath.Join(jobDir, "holder-*.log"))
	require.NoError(t, err)
	idOf := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "holder-"), ".log"))
		return n
	}
	sort.Slice(logs, func(i, j int) bool { return idOf(logs[i]) < idOf(logs[j]) })
	holderRe := regexp.MustCompile(`holder job \d+ on (\S+)`)
	var allocs [][]string
	for _, l := range logs {
		data, err := os.ReadFile(l)
		require.NoError(t, err)
		m := holderRe.FindStringSubmatch(string(data))
		require.NotNil(t, m, "%s: %q", l, data)
		hosts, err := slurm.ExpandHostlist(m[1])
		require.NoError(t, err)
		allocs = append(allocs, hosts)
	}
	t.Logf("allocations of %s: %v (victim %s)", pts[0].PointID, allocs, victim)
	require.GreaterOrEqual(t, len(allocs), 2, "a fresh allocation after the node was excluded")
	assert.Contains(t, allocs[0], victim, "precondition: the first allocation got the bad node")
	assert.NotContains(t, allocs[len(allocs)-1], victim, "the next allocation must not get the excluded node")

	// The ledger: two gpu-xid faults against the node, its own Xid line.
	store := e.ledger()
	faults, err := store.NodeFaults(context.Background(), "", time.Time{})
	require.NoError(t, err)
	require.Len(t, faults, 2, "%+v", faults)
	for _, f := range faults {
		assert.Equal(t, victim, f.Node)
		assert.Equal(t, failure.GPUXid, f.Class)
		assert.Contains(t, f.Excerpt, victim+" kernel: NVRM: Xid")
		assert.Equal(t, "bringup", f.Stage)
	}
	// The point's failed attempts say why it re-allocated.
	fails, err := store.StageFailures(context.Background(), in.SweepID)
	require.NoError(t, err)
	require.NotEmpty(t, fails)
	assert.Equal(t, failure.GPUXid, fails[len(fails)-1].Class)

	// starter nodes: excluded, with the evidence; clear lets it back in.
	text, code := e.cli("nodes", "--cluster", profile)
	require.Equal(t, 0, code, text)
	t.Log("\n" + text)
	assert.Regexp(t, regexp.QuoteMeta(victim)+`\s+slurm-emu\s+excluded\s+2`, text)
	assert.Contains(t, text, "NVRM: Xid")
	text, code = e.cli("nodes", "clear", "--cluster", profile, victim)
	require.Equal(t, 0, code, text)
	assert.Contains(t, text, "was excluded")
	js, code := e.cli("nodes", "--cluster", profile, "--json")
	require.Equal(t, 0, code, js)
	var listed struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &listed))
	assert.Empty(t, listed.Nodes, "cleared: no node counts any more")

	require.Eventually(t, func() bool { return len(part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs left in squeue: %v", part.Squeue(t))
}
