package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/workflows"
)

func TestBuildSweepSeed(t *testing.T) {
	in, p, err := buildSweep(sweepRequest{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.Len(t, in.Points, 8)
	require.Len(t, p.Points, 8)
	require.Equal(t, 18, in.NodeBudget)
	require.Equal(t, "cluster-local-sim", in.TaskQueue)
	var nodes []int
	evals := 0
	for _, pt := range in.Points {
		nodes = append(nodes, pt.Nodes)
		require.InDelta(t, 3.77, pt.SyntheticAL, 1e-9, "golden AL for DSpark, 6 draft tokens, thinking on")
		require.NotEmpty(t, pt.CheckpointSource, "the recipe's model alias resolves through the cluster profile")
		require.Regexp(t, `^[0-9a-f]{64}-c\d+$`, pt.Identity)
		if pt.Eval {
			evals++
		}
	}
	require.Equal(t, []int{2, 2, 6, 6, 12, 16, 16, 16}, nodes)
	require.Equal(t, 4, evals)

	// The sweep ID is deterministic: the same plan gives the same ID.
	again, _, err := buildSweep(sweepRequest{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.NoError(t, err)
	require.Equal(t, in.SweepID, again.SweepID)
}

func TestBuildSweepErrors(t *testing.T) {
	req := sweepRequest{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml"}
	tests := []struct {
		name   string
		faults []string
		want   string
	}{
		{"ambiguous point", []string{"conc128:eval"}, "matches 2 points"},
		{"unknown stage", []string{"conc64_:reboot"}, `unknown stage "reboot"`},
		{"bad count", []string{"conc64_:eval:zero"}, "positive integer"},
		{"bad shape", []string{"conc64_"}, "POINT:STAGE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.Faults = tc.faults
			_, _, err := buildSweep(r)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// A golden AL table that disagrees with the config's pinned AL is caught.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "golden_al_distribution.yaml"), []byte("deepseek-v4-pro-0813:\n  thinking_on:\n    6: 3.5\n"), 0o644))
	sweep, err := os.ReadFile("../configs/sweeps/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	abs, _ := filepath.Abs("../configs")
	text := string(sweep)
	text = strings.ReplaceAll(text, "../dsv4-gb200-agentx.yaml", filepath.Join(abs, "dsv4-gb200-agentx.yaml"))
	text = strings.ReplaceAll(text, "../runners.yaml", filepath.Join(abs, "runners.yaml"))
	text = strings.ReplaceAll(text, "../clusters/gb200-nvl72.yaml", filepath.Join(abs, "clusters", "gb200-nvl72.yaml"))
	text = strings.ReplaceAll(text, "recipes-root: ..", "recipes-root: "+abs)
	text = strings.ReplaceAll(text, "${SWEEPFLOW_GOLDEN_AL:-../golden-al/dsv4-pro-0813-dspark.yaml}", filepath.Join(dir, "golden_al_distribution.yaml"))
	sweepFile := filepath.Join(dir, "sweep.yaml")
	require.NoError(t, os.WriteFile(sweepFile, []byte(text), 0o644))
	_, _, err = buildSweep(sweepRequest{SweepFile: sweepFile, ClusterFile: "../configs/clusters/local-sim.yaml"})
	require.ErrorContains(t, err, "golden AL for 6 draft tokens is 3.5")
}

// A plan of storedPlanPoints points or more starts the sweep with a
// reference to the plan stored in the ledger, not the points; the static
// details list a bounded table.
func TestWorkflowInputRefsLargePlans(t *testing.T) {
	for _, n := range []int{1, storedPlanPoints - 1, storedPlanPoints, 10000} {
		in := &workflows.SweepInput{SweepID: "s", Points: make([]activities.PointSpec, n)}
		got := workflowInput(in)
		if n < storedPlanPoints {
			assert.Len(t, got.Points, n, "n=%d", n)
			assert.Empty(t, got.PlanRef, "n=%d", n)
		} else {
			assert.Empty(t, got.Points, "n=%d", n)
			assert.Equal(t, "s", got.PlanRef, "n=%d", n)
		}
		assert.Len(t, in.Points, n, "the caller's input is untouched")
		assert.LessOrEqual(t, strings.Count(sweepDetails(in), "\n"), detailRows+6, "n=%d", n)
	}
}

// A sweep's activities go to the queue the cluster profile names (the
// workers poll the same one), not to one derived from the cluster's name.
func TestBuildSweepUsesProfileTaskQueue(t *testing.T) {
	prof, err := os.ReadFile("../configs/clusters/local-sim.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	custom := strings.Replace(string(prof), "task-queue: cluster-local-sim", "task-queue: gb200-rack-7", 1)
	custom = strings.ReplaceAll(custom, "../../.sweepflow", filepath.Join(dir, "data"))
	custom = strings.Replace(custom, "recipes-root: ..", "recipes-root: "+absPath("../configs"), 1)
	require.Contains(t, custom, "task-queue: gb200-rack-7")
	cf := filepath.Join(dir, "local-sim.yaml")
	require.NoError(t, os.WriteFile(cf, []byte(custom), 0o644))
	in, _, err := buildSweep(sweepRequest{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: cf})
	require.NoError(t, err)
	require.Equal(t, "gb200-rack-7", in.TaskQueue)
}
