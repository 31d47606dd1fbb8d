package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/reftest"
	"github.com/sweepflow/sweepflow/internal/rowrecipe"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/workflows"
)

// Issue 11 acceptance: a fixed-seq-len multinode key of InferenceX's shared
// master config (1k1k or 8k1k) plans with distinct point identities and runs
// end to end on local-sim. The key's srt-slurm recipes are not part of the
// InferenceX checkout, so the test writes its own, consistent with each row.

const localSimCluster = "../configs/clusters/local-sim.yaml"

// ixFixedKey is the InferenceX key the test plans, with what it was planned
// from.
type ixFixedKey struct {
	Key         string
	Master      string // shared master config
	Runners     string // shared runners.yaml
	RecipesRoot string // synthesized recipes
	Rows        []*matrix.Row
	SweepFile   string
	Plan        *plan.Plan
}

// isFixedSeqLen1k1kOr8k1k says whether a row is a fixed-seq-len 1k1k or
// 8k1k row (InferenceX's --seq-lens names).
func isFixedSeqLen1k1kOr8k1k(r *matrix.Row) bool {
	return r.Scenario == matrix.FixedSeqLen && r.Int("osl") == 1024 && (r.Int("isl") == 1024 || r.Int("isl") == 8192)
}

// pickIXFixedKey picks, in master-config order, the first multinode key
// with fixed-seq-len 1k1k or 8k1k rows that local-sim can run: its runner
// is served there, each of its recipes can be written consistently with
// every row that names it, the whole key plans (every row fits on the 18
// nodes and agrees with its recipe), and the simulator accepts every
// point's topology. InferenceX's key names do not say 1k1k or 8k1k (the
// seq-len is a scenario field), so rows are tested, not names. Rejected
// keys are logged with the reason with -v; if none qualifies the test
// fails with the full list.
func pickIXFixedKey(t *testing.T) *ixFixedKey {
	t.Helper()
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml")
	masterPath, runnersPath := filepath.Join(ix, "nvidia-master.yaml"), filepath.Join(ix, "runners.yaml")
	master, err := ixconfig.LoadMaster(masterPath)
	require.NoError(t, err)
	runners, err := ixconfig.LoadRunners(runnersPath)
	require.NoError(t, err)
	cl, err := config.LoadCluster(localSimCluster)
	require.NoError(t, err)

	var rejected []string
	reject := func(key, format string, args ...any) {
		rejected = append(rejected, key+": "+fmt.Sprintf(format, args...))
	}
	for _, e := range master.Entries {
		if !e.Multinode || len(e.Fixed) == 0 {
			continue
		}
		rows, err := matrix.Generate(master, runners, matrix.Options{Keys: []string{e.Key}})
		require.NoError(t, err, e.Key)
		var fixed bool
		for _, r := range rows {
			fixed = fixed || isFixedSeqLen1k1kOr8k1k(r)
		}
		if !fixed {
			continue // not a 1k1k/8k1k key: not a candidate at all
		}
		if !cl.ServesRunner(e.Runner) {
			reject(e.Key, "runner %q not served by %s (serves %v)", e.Runner, cl.Name, cl.Runners)
			continue
		}
		root := t.TempDir()
		if _, err := rowrecipe.Write(root, rows, cl, false); err != nil {
			reject(e.Key, "%v", err)
			continue
		}
		sweepFile := writeIXSweep(t, e.Key, []string{masterPath}, runnersPath, root)
		in, p, err := control.Build(control.Request{SweepFile: sweepFile})
		if err != nil {
			reject(e.Key, "plan: %v", err)
			continue
		}
		var bad []string
		for _, pt := range in.Points {
			if _, err := sim.ParseDeployment(pt.Layout); err != nil {
				bad = append(bad, err.Error())
			}
		}
		if len(bad) > 0 {
			reject(e.Key, "the simulator cannot run %s", strings.Join(bad, "; "))
			continue
		}
		t.Logf("InferenceX key %s: %d rows, %d points (%d earlier candidates rejected)", e.Key, len(rows), len(p.Points), len(rejected))
		if testing.Verbose() {
			for _, r := range rejected {
				t.Logf("  rejected %s", r)
			}
		}
		return &ixFixedKey{Key: e.Key, Master: masterPath, Runners: runnersPath, RecipesRoot: root, Rows: rows, SweepFile: sweepFile, Plan: p}
	}
	t.Fatalf("no multinode fixed-seq-len 1k1k/8k1k key of %s runs on %s:\n  %s", masterPath, cl.Name, strings.Join(rejected, "\n  "))
	return nil
}

// writeIXSweep writes a sweep file for key on local-sim, recipes under root.
func writeIXSweep(t *testing.T, key string, masters []string, runners, recipesRoot string) string {
	t.Helper()
	cluster, err := filepath.Abs(localSimCluster)
	require.NoError(t, err)
	sw := map[string]any{
		"name": "ix-" + key, "config-files": masters, "runner-config": runners, "config-keys": []string{key},
		"cluster": cluster, "recipes-root": recipesRoot, "evals": false,
	}
	data, err := yaml.Marshal(sw)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// trimmedMaster writes a master config holding only row's search-space
// entry of its key, at concurrencies concs: the same deployment, fewer
// points.
func trimmedMaster(t *testing.T, r *matrix.Row, concs []int) string {
	t.Helper()
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	num := func(v int) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)} }
	mapping := func(kv ...*yaml.Node) *yaml.Node {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: kv}
	}
	seq := func(items ...*yaml.Node) *yaml.Node {
		return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
	}

	entry := mapping()
	for i := 0; i+1 < len(r.Entry.Node.Content); i += 2 {
		if k := r.Entry.Node.Content[i]; k.Value != "scenarios" {
			entry.Content = append(entry.Content, k, r.Entry.Node.Content[i+1])
		}
	}
	search := mapping()
	for i := 0; i+1 < len(r.Search.Node.Content); i += 2 {
		switch k := r.Search.Node.Content[i]; k.Value {
		case "conc-list", "conc-start", "conc-end":
		default:
			search.Content = append(search.Content, k, r.Search.Node.Content[i+1])
		}
	}
	list := seq()
	list.Style = yaml.FlowStyle
	for _, c := range concs {
		list.Content = append(list.Content, num(c))
	}
	search.Content = append(search.Content, str("conc-list"), list)
	fixed := mapping(str("isl"), num(r.Int("isl")), str("osl"), num(r.Int("osl")), str("search-space"), seq(search))
	entry.Content = append(entry.Content, str("scenarios"), mapping(str(matrix.FixedSeqLen), seq(fixed)))
	data, err := yaml.Marshal(mapping(str(r.ConfigKey), entry))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "trimmed-master.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// TestIXFixedSeqLenKeyPlansDistinctIdentities plans the picked InferenceX
// key through a sweep file, as `sweep start` does: every point has its own
// identity and point ID, although the concurrencies of a row share one
// exp-name and one deployment.
func TestIXFixedSeqLenKeyPlansDistinctIdentities(t *testing.T) {
	k := pickIXFixedKey(t)
	p := k.Plan
	require.NotEmpty(t, p.Points)

	identities, ids := map[string]int{}, map[string]int{}
	byRow := map[int][]plan.Point{}
	for i, pt := range p.Points {
		assert.Equal(t, k.Key, pt.ConfigKey)
		if j, dup := identities[pt.Identity]; dup {
			t.Errorf("points %d (%s c%d) and %d (%s c%d) share identity %s", j, p.Points[j].ExpName, p.Points[j].Conc, i, pt.ExpName, pt.Conc, pt.Identity)
		}
		identities[pt.Identity] = i
		if j, dup := ids[pt.ID]; dup {
			t.Errorf("points %d and %d share point ID %s", j, i, pt.ID)
		}
		ids[pt.ID] = i
		byRow[pt.RowIndex] = append(byRow[pt.RowIndex], pt)
	}
	// The case the identity exists for: several concurrencies of one row,
	// one exp-name, one deployment.
	multi := 0
	for _, pts := range byRow {
		if len(pts) < 2 {
			continue
		}
		multi++
		for _, pt := range pts[1:] {
			assert.Equal(t, pts[0].ExpName, pt.ExpName, "a fixed-seq-len row names every concurrency alike")
			assert.Equal(t, pts[0].DeploymentHash, pt.DeploymentHash, "a row is one deployment")
			assert.NotEqual(t, pts[0].Conc, pt.Conc)
		}
	}
	require.Positive(t, multi, "key %s has no row with several concurrencies", k.Key)

	// The sweep input carries exactly the planned identities.
	in, _, err := control.Build(control.Request{SweepFile: k.SweepFile})
	require.NoError(t, err)
	require.Len(t, in.Points, len(p.Points))
	wids := map[string]bool{}
	for i, sp := range in.Points {
		assert.Equal(t, p.Points[i].Identity, sp.Identity)
		assert.Equal(t, p.Points[i].ID, sp.PointID)
		wid := workflows.PointWorkflowID(in.SweepID, sp.PointID)
		assert.False(t, wids[wid], "child workflow ID %s twice", wid)
		wids[wid] = true
	}
}

// TestIntegrationIXFixedSeqLenKeyOnLocalSim runs the picked key's first
// row with several concurrencies (its first three) end to end on the dev
// server and local-sim: every point completes under its own workflow, with
// the identity the full key's plan gave it, and the ledger holds each
// point's own figures.
func TestIntegrationIXFixedSeqLenKeyOnLocalSim(t *testing.T) {
	k := pickIXFixedKey(t)
	planned := map[string]plan.Point{}
	for _, pt := range k.Plan.Points {
		planned[pt.Identity] = pt
	}
	var row *matrix.Row
	for _, r := range k.Rows {
		if isFixedSeqLen1k1kOr8k1k(r) && len(r.Conc()) >= 2 {
			row = r
			break
		}
	}
	require.NotNil(t, row, "key %s has no 1k1k/8k1k row with several concurrencies", k.Key)
	concs := row.Conc()[:min(3, len(row.Conc()))]
	t.Logf("running %s %s at conc %v", row.Search.Path, row.ExpName(), concs)
	sweepFile := writeIXSweep(t, k.Key, []string{trimmedMaster(t, row, concs)}, k.Runners, k.RecipesRoot)

	e := newITEnv(t)
	e.startWorker()
	// The trimmed master holds this key alone, so engine-first cannot see
	// the key's vLLM/SGLang siblings in the full master: waive it.
	out, code := e.cli("sweep", "start", "--sweep", sweepFile, "--fast-retries", "--json", "--allow", "engine-first")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
		Points  int    `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.Equal(t, len(concs), started.Points)
	pr := e.wait(started.SweepID, 5*time.Minute)
	require.Equal(t, len(concs), pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	in, _, err := control.Build(control.Request{SweepFile: sweepFile, ID: started.SweepID})
	require.NoError(t, err)
	wids := map[string]bool{}
	for _, sp := range in.Points {
		full, ok := planned[sp.Identity]
		require.True(t, ok, "c%d: the trimmed row keeps the identity the full key plans (%s)", sp.Conc, sp.Identity)
		assert.Equal(t, full.ID, sp.PointID)
		wids[workflows.PointWorkflowID(started.SweepID, sp.PointID)] = true
	}
	require.Len(t, wids, len(concs), "one child workflow ID per point")
	for _, pp := range pr.Points {
		assert.True(t, wids[pp.WorkflowID], "unexpected point workflow %s", pp.WorkflowID)
		assert.Equal(t, point.StatusCompleted, pp.Status, pp.PointID)
	}

	perf := e.perfByIdentity(e.ledger(), started.SweepID)
	require.Len(t, perf, len(concs))
	tputs := map[float64]bool{}
	for id, r := range perf {
		full, ok := planned[id]
		require.True(t, ok, "ledger row for unplanned identity %s", id)
		assert.Equal(t, full.Conc, r.Conc, "%s: figures recorded at its own concurrency", id)
		assert.Equal(t, row.ExpName(), r.ExpName)
		assert.True(t, r.Simulated)
		require.Greater(t, r.OutputTputPerGPU, 0.0)
		tputs[r.OutputTputPerGPU] = true
	}
	assert.Len(t, tputs, len(concs), "each concurrency measured its own throughput: %+v", perf)
}
