package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/worker/workers"
	"github.com/sweepflow/sweepflow/workflows"
)

// The fill and worker-kill tests run a fixed-seq-len key on a one-GPU
// aggregated deployment (testdata/adaptive-master.yaml): the simulator
// keeps its latency model there on a two-core CI host even 20x faster than
// the engine's clock. With a 7x slower engine its median E2EL runs from
// about 19 s at c32 to about 100 s at c256: the seed's hole between
// neighbours. The slo test runs on the seed's own 2P1D deployment.
const (
	adaptiveKey = "dsv4-fp4-sim-tp1-128-agg"
	// adaptiveTimeScale x adaptiveSlowdown is 0.05: a second of the
	// engine's clock takes 50 ms, and a c256 point about 9 s.
	adaptiveTimeScale = 0.05 / adaptiveSlowdown
	adaptiveSlowdown  = 7
)

// adaptiveWorkerConfig is a worker for the adaptive fixture.
func (e *itEnv) adaptiveWorkerConfig() *workers.Config {
	cfg := e.workerConfig()
	cfg.SimTimeScale, cfg.SimSlowdown = adaptiveTimeScale, adaptiveSlowdown
	return cfg
}

// startWorkerConfig runs control and cluster workers with cfg in this
// process.
func (e *itEnv) startWorkerConfig(cfg *workers.Config) {
	acts, closeFn, err := cfg.Activities(context.Background(), zap.NewNop())
	require.NoError(e.t, err)
	w, err := workers.Start(e.c, workers.Options{ClusterName: cfg.ClusterName(), Control: true, Activities: acts})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { w.Stop(); closeFn() })
}

// startAdaptiveWorkerProcess runs the worker binary with the fixture's
// simulator settings.
func (e *itEnv) startAdaptiveWorkerProcess(logName string) *exec.Cmd {
	return e.startWorkerProcess(logName, "--sim-time-scale", strconv.FormatFloat(adaptiveTimeScale, 'f', -1, 64),
		"--sim-slowdown", strconv.Itoa(adaptiveSlowdown))
}

// adaptiveSweepFile writes a sweep file over the fixture with the given
// planned concurrencies and adaptive: entries (YAML list items).
func adaptiveSweepFile(t *testing.T, name string, concs []int, adaptive string) string {
	t.Helper()
	dir := t.TempDir()
	master, err := os.ReadFile("testdata/adaptive-master.yaml")
	require.NoError(t, err)
	var cs []string
	for _, c := range concs {
		cs = append(cs, strconv.Itoa(c))
	}
	m := strings.Replace(string(master), "conc-list: CONC_LIST", "conc-list: ["+strings.Join(cs, ", ")+"]", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "adaptive-master.yaml"), []byte(m), 0o644))
	abs := func(p string) string { a, err := filepath.Abs(p); require.NoError(t, err); return a }
	s := fmt.Sprintf("name: %s\nconfig-files: [adaptive-master.yaml]\nrunner-config: %s\nconfig-keys: [%s]\ncluster: %s\nrecipes-root: %s\nevals: false\n",
		name, abs("../configs/runners.yaml"), adaptiveKey, abs("../configs/clusters/local-sim.yaml"), abs("testdata"))
	if adaptive != "" {
		s += "adaptive:\n" + adaptive
	}
	file := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(file, []byte(s), 0o644))
	return file
}

// startSweepCLI starts a sweep file as a user does and returns its ID.
func (e *itEnv) startSweepCLI(file string, args ...string) string {
	out, code := e.cli(append([]string{"sweep", "start", "--sweep", file, "--fast-retries", "--json"}, args...)...)
	require.Equal(e.t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
	}
	require.NoError(e.t, json.Unmarshal([]byte(out), &started))
	return started.SweepID
}

// ledgerCurve is a sweep's curve as `starter coverage` reads it.
func (e *itEnv) ledgerCurve(store *results.Store, sweep string) []curvegaps.Curve {
	perf, err := store.Perf(context.Background(), sweep)
	require.NoError(e.t, err)
	return curvegaps.FromPerf(perf)
}

// perfBringUps counts the perf-mode BringUp activities of a sweep's points.
func (e *itEnv) perfBringUps(pr *workflows.SweepProgress) (bringUps, allocs int) {
	for _, p := range pr.Points {
		bringUps += e.bringUps(p.WorkflowID)["perf"]
		n, _ := e.activityRuns(p.WorkflowID, "Allocate")
		allocs += n
	}
	return bringUps, allocs
}

// TestIntegrationAdaptiveFill is issue 38's first acceptance: a deployment
// whose planned points leave a hole like the seed's (about 19 s -> 100 s of
// median E2EL between neighbours) runs with fill. It ends with no gap above
// the factor, at most 3 added points, and as many bring-ups as the plan
// without them; status, the Web UI attribute and coverage agree.
func TestIntegrationAdaptiveFill(t *testing.T) {
	start := time.Now()
	e := newITEnv(t)
	e.startWorkerConfig(e.adaptiveWorkerConfig())
	file := adaptiveSweepFile(t, "adaptive-fill", []int{32, 256}, "  - {config-key: "+adaptiveKey+", mode: fill, max-points: 3}\n")
	_, p, err := control.Build(control.Request{SweepFile: file})
	require.NoError(t, err)
	planned := len(p.BringUpGroups())

	id := e.startSweepCLI(file)
	pr := e.wait(id, 5*time.Minute)
	t.Logf("fill sweep %s: %s", id, time.Since(start).Round(time.Second))

	var added []workflows.PointProgress
	for _, p := range pr.Points {
		require.Equal(t, point.StatusCompleted, p.Status, "%s", p.PointID)
		if p.Added != nil {
			added = append(added, p)
		}
	}
	store := e.ledger()
	curves := e.ledgerCurve(store, id)
	for _, c := range curves {
		for _, pt := range c.Points {
			t.Logf("c%d: median E2EL %.1f s, interactivity %.1f tok/s/user", pt.Conc, pt.E2ELSeconds, pt.Interactivity)
		}
	}
	require.NotEmpty(t, added, "the plan left a hole")
	require.LessOrEqual(t, len(added), 3)
	res, err := curvegaps.Find(curves, curvegaps.DefaultFactor)
	require.NoError(t, err)
	require.Empty(t, res.Gaps, "no gap above x2 is left")

	// The plan's bring-ups, no more: the added points ran on its server.
	bringUps, allocs := e.perfBringUps(pr)
	require.Equal(t, planned, bringUps)
	require.Equal(t, planned, allocs)
	for _, a := range added {
		require.Equal(t, point.AdaptiveFill, a.Added.Mode)
		require.Contains(t, a.Added.Reason, "whose server is up")
		require.True(t, a.Conc > 32 && a.Conc < 256, "c%d", a.Conc)
	}

	// starter status says which deployment served each and why; coverage
	// finds nothing left; the Web UI lists the added points.
	out, code := e.cli("status", id)
	require.Equal(t, 0, code, out)
	t.Log(out)
	require.Contains(t, out, "added by fill")
	require.Contains(t, out, "adaptive "+adaptiveKey)
	out, code = e.cli("coverage", id, "--json")
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `{"gaps":[]}`, out)
	e.eventually("the Web UI to list the added points", 30*time.Second, func() bool {
		return len(e.list(`SweepID = "`+id+`" AND Adaptive = "fill" AND SweepflowKind = "point"`)) == len(added)
	})
	assert.Equal(t, []string{id}, e.list(`Adaptive = "fill" AND SweepflowKind = "sweep"`))

	// InferenceX's append-only convention: check passes the added points,
	// the export marks them and writes the changelog entry.
	out, code = e.cli("check", "--sweep", file, "--added", id)
	require.Equal(t, 0, code, out)
	dir := t.TempDir()
	out, code = e.cli("export", "--sweep", id, "--out", dir)
	require.Equal(t, 0, code, out)
	entry, err := os.ReadFile(filepath.Join(dir, "perf-changelog-append-only.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(entry), "append-only: true")
	bmk, err := os.ReadFile(filepath.Join(dir, "agg_bmk.json"))
	require.NoError(t, err)
	assert.Equal(t, len(added), strings.Count(string(bmk), `"append_only": true`))
	// starter stats books the added points apart; the report marks them.
	out, code = e.cli("stats", "--sweep", id, "--json")
	require.Equal(t, 0, code, out)
	var stats struct {
		Categories map[string]float64 `json:"categories"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &stats))
	assert.Greater(t, stats.Categories["adaptive"], 0.0, "%v", stats.Categories)
	out, code = e.cli("report", "--sweep", id, "--out", filepath.Join(dir, "r.html"))
	require.Equal(t, 0, code, out)
	page, err := os.ReadFile(filepath.Join(dir, "r.html"))
	require.NoError(t, err)
	assert.Equal(t, len(added), strings.Count(string(page), `class="added-row"`))
}

// The slo test runs on the seed's 2P1D DEP16/DEP32 deployment itself (its
// recipe, sized for c1280), on the engine's own clock as the demo does: the
// prefill queue saturates between c1024 and c1152, where p99 TTFT jumps from
// about 3 s to over 10 s, so an SLO of 6 s falls between two candidates.
const seedPerfWindow = 6 * time.Second

// TestIntegrationAdaptiveSLOMatchesBruteForce is issue 38's second
// acceptance: on the seed's 2P1D deployment, slo finds the concurrency a
// brute-force scan of every candidate of its grid finds, within one step
// of the grid, with fewer points.
func TestIntegrationAdaptiveSLOMatchesBruteForce(t *testing.T) {
	start := time.Now()
	e := newITEnv(t)
	cfg := e.workerConfig()
	cfg.SimTimeScale, cfg.PerfDuration = 1, seedPerfWindow
	e.startWorkerConfig(cfg)
	const lo, step, hi = 768, 128, 1280
	slo := point.SLO{Metric: point.SLOTTFTp99, Max: 6}
	var grid []int
	for c := lo; c <= hi; c += step {
		grid = append(grid, c)
	}

	// Brute force: every candidate, measured as planned points.
	bf := e.startSweepCLI(seed2P1DSweepFile(t, "seed-2p1d-brute", grid, ""))
	bpr := e.wait(bf, 15*time.Minute)
	require.Equal(t, len(grid), bpr.Counts[point.StatusCompleted], "%+v", bpr.Counts)
	bruteAt := time.Since(start)
	brute := 0
	perf, err := e.ledger().Perf(context.Background(), bf)
	require.NoError(t, err)
	slices.SortFunc(perf, func(a, b results.PerfResult) int { return a.Conc - b.Conc })
	for _, r := range perf {
		v, ok := slo.Value(&r.PerfSummary)
		require.True(t, ok, "c%d has %s", r.Conc, slo.Metric)
		t.Logf("brute force c%d: %s %.2f s, median E2EL %.1f s", r.Conc, slo.Metric, v, r.E2ELMedianMs/1000)
		if slo.Meets(v) {
			brute = r.Conc
		}
	}
	require.NotZero(t, brute, "some candidate meets the SLO")
	require.Less(t, brute, hi, "and some misses it")

	// slo: the seed curve's two ends planned, and the search between them.
	file := seed2P1DSweepFile(t, "seed-2p1d-slo", []int{lo, hi},
		fmt.Sprintf("  - {config-key: %s, mode: slo, slo: {metric: %s, max: %g}, grid: {min: %d, max: %d, step: %d}, max-points: 4}\n",
			seedDisaggKey, slo.Metric, slo.Max, lo, hi, step))
	id := e.startSweepCLI(file)
	pr := e.wait(id, 15*time.Minute)
	require.Len(t, pr.Adaptive, 1)
	require.Len(t, pr.Adaptive[0].Deployments, 1)
	d := pr.Adaptive[0].Deployments[0]
	require.Contains(t, d.Topology, "2P1D")
	require.NotNil(t, d.Found, "%+v", d)
	added := len(pr.Adaptive[0].Added)
	t.Logf("slo %s on %s: found c%d with %d points (2 planned + %d added): %s; brute force c%d with %d points; brute force %s, slo %s",
		slo, d.Topology, d.Found.Conc, 2+added, added, d.Stop, brute, len(grid), bruteAt.Round(time.Second), (time.Since(start) - bruteAt).Round(time.Second))
	require.LessOrEqual(t, abs(d.Found.Conc-brute), step, "within one step of the grid")
	require.Less(t, 2+added, len(grid), "fewer points than the scan")
	require.Contains(t, d.Stop, "slo done")
	require.Greater(t, d.Found.Goodput, 0.0)
	// No added point brought a server up: one perf bring-up for the lot.
	bringUps, _ := e.perfBringUps(pr)
	require.Equal(t, 1, bringUps)
}

// seedDisaggKey is the seed's disaggregated key; its 2P1D DEP16/DEP32
// deployment is the search-space entry with a -2p1d- recipe.
const seedDisaggKey = "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"

// seed2P1DSweepFile writes a sweep file over the seed's master config
// (configs/dsv4-gb200-agentx.yaml) cut to its 2P1D deployment, whose
// conc-list becomes concs, with the given adaptive: entries.
func seed2P1DSweepFile(t *testing.T, name string, concs []int, adaptive string) string {
	t.Helper()
	raw, err := os.ReadFile("../configs/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	key := yamlValue(t, doc.Content[0], seedDisaggKey)
	// scenarios: {agentic-coding: [{dram-utilization, search-space: [...]}]}
	entries := yamlValue(t, yamlValue(t, key, "scenarios").Content[1].Content[0], "search-space")
	var kept []*yaml.Node
	for _, entry := range entries.Content {
		b, err := yaml.Marshal(entry)
		require.NoError(t, err)
		if !strings.Contains(string(b), "-2p1d-") {
			continue
		}
		cl := yamlValue(t, entry, "conc-list")
		cl.Content = nil
		for _, c := range concs {
			cl.Content = append(cl.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(c)})
		}
		kept = append(kept, entry)
	}
	require.Len(t, kept, 1, "one 2P1D entry in the seed")
	entries.Content = kept
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: seedDisaggKey}, key}})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seed-2p1d.yaml"), out, 0o644))
	abs := func(p string) string { a, err := filepath.Abs(p); require.NoError(t, err); return a }
	s := fmt.Sprintf("name: %s\nconfig-files: [seed-2p1d.yaml]\nrunner-config: %s\nconfig-keys: [%s]\ncluster: %s\nrecipes-root: %s\nevals: false\ngolden-al: %s\nthinking: true\n",
		name, abs("../configs/runners.yaml"), seedDisaggKey, abs("../configs/clusters/local-sim.yaml"), abs("../configs"), abs("../configs/golden-al/dsv4-pro-0813-dspark.yaml"))
	if adaptive != "" {
		s += "adaptive:\n" + adaptive
	}
	file := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(file, []byte(s), 0o644))
	return file
}

// yamlValue is the value of key in a YAML mapping.
func yamlValue(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	t.Fatalf("the seed's master config has no %s", key)
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestIntegrationAdaptiveWorkerKilled is issue 38's third acceptance: the
// worker is killed (-9) while an added point runs its perf; a new worker
// takes over, and the search loses no point and adds none twice. The
// sweep's and the deployment's histories are the replay fixtures of a
// sweep with adaptive points (SWEEPFLOW_RECORD_HISTORIES=1).
func TestIntegrationAdaptiveWorkerKilled(t *testing.T) {
	start := time.Now()
	e := newITEnv(t)
	first := e.startAdaptiveWorkerProcess("worker1.log")
	file := adaptiveSweepFile(t, "adaptive-kill", []int{32, 256}, "  - {config-key: "+adaptiveKey+", mode: fill, max-points: 3}\n")
	id := e.startSweepCLI(file, "--id", "it-adaptive-kill")

	var victim string
	e.eventually("an added point to be in its perf stage", 3*time.Minute, func() bool {
		for _, wid := range e.list(`SweepID = "` + id + `" AND Adaptive = "fill" AND SweepflowKind = "point" AND ExecutionStatus = "Running"`) {
			if activityStarted(e.c, wid, "Perf") {
				victim = wid
				return true
			}
		}
		return false
	})
	require.NoError(t, first.Process.Kill()) // SIGKILL: no graceful stop
	_, _ = first.Process.Wait()
	e.startAdaptiveWorkerProcess("worker2.log")

	pr := e.wait(id, 5*time.Minute)
	t.Logf("killed during %s; sweep done after %s", victim, time.Since(start).Round(time.Second))
	_, attempts := e.activityRuns(victim, "Perf")
	require.GreaterOrEqual(t, attempts, 2, "the added point's perf ran again on the new worker")

	k := pr.Adaptive[0]
	var addedIDs []string
	concs := map[int]bool{}
	for _, a := range k.Added {
		require.False(t, concs[a.Conc], "c%d added twice", a.Conc)
		concs[a.Conc] = true
		addedIDs = append(addedIDs, a.PointID)
	}
	require.Contains(t, addedIDs, victim[len(id)+1:])
	var rows []string
	for _, p := range pr.Points {
		require.Equal(t, point.StatusCompleted, p.Status, p.PointID)
		if p.Added != nil {
			rows = append(rows, p.PointID)
		}
	}
	require.ElementsMatch(t, addedIDs, rows, "every decided point ran, once")
	require.Len(t, pr.Points, 2+len(addedIDs))

	// The ledger: one perf row and one perf output per point.
	store := e.ledger()
	perf := e.perfByIdentity(store, id)
	require.Len(t, perf, len(pr.Points))
	n, err := store.CountStageOutputs(context.Background(), id, "perf")
	require.NoError(t, err)
	require.Equal(t, len(pr.Points), n)
	pts, err := store.Points(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, pts, len(pr.Points))

	dep := workflows.DeploymentWorkflowID(id, k.Deployments[0].Key)
	e.recordHistories(map[string]string{"sweep-adaptive.json": id, "deployment-adaptive.json": dep})
}
