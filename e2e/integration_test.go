package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/worker/workers"
	"github.com/sweepflow/sweepflow/workflows"
)

// activityStarted reports whether workflow wid's activity of type typ is
// running (started, not just scheduled).
func activityStarted(c client.Client, wid, typ string) bool {
	d, err := c.DescribeWorkflowExecution(context.Background(), wid, "")
	if err != nil {
		return false
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == typ && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return true
		}
	}
	return false
}

// activityBeating reports whether workflow wid's running activity of type
// typ has recorded heartbeat details.
func activityBeating(c client.Client, wid, typ string) bool {
	d, err := c.DescribeWorkflowExecution(context.Background(), wid, "")
	if err != nil {
		return false
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == typ && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED &&
			len(pa.GetHeartbeatDetails().GetPayloads()) > 0 {
			return true
		}
	}
	return false
}

// itEnv is a real Temporal dev server plus what a worker on the simulated
// local cluster needs: a built starter binary (the engine), a home directory
// with a simulated checkpoint, and the real GSM8K split.
type itEnv struct {
	t          *testing.T
	c          client.Client
	addr       string
	temporal   string
	home       string
	starterBin string
	gsm8kDir   string
}

var buildOnce struct {
	sync.Once
	dir string
	err error
}

// starterBinary builds the starter command once per test binary.
func starterBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sweepflow-starter-")
		if err != nil {
			buildOnce.err = err
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "starter"), "../starter").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		buildOnce.dir = dir
	})
	require.NoError(t, buildOnce.err)
	return filepath.Join(buildOnce.dir, "starter")
}

func newITEnv(t *testing.T) *itEnv { return newITEnvWith(t, 0) }

// newITEnvWith starts the dev server, with its Web UI on uiPort when it is
// not 0; extra goes to `temporal server start-dev`.
func newITEnvWith(t *testing.T, uiPort int, extra ...string) *itEnv {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	wd, _ := os.Getwd()
	bin, err := temporalx.CLIPath(wd)
	if err != nil {
		prereq.Missingf(t, "no Temporal CLI (%v); scripts/install-temporal.sh installs it", err)
	}
	// The real split when SWEEPFLOW_GSM8K_DIR names it, else our own.
	gsm := gsm8kfixture.Dir(t)
	for name, typ := range temporalx.SearchAttributeTypes() {
		extra = append(extra, "--search-attribute", name+"="+typ)
	}
	opts := testsuite.DevServerOptions{
		ExistingPath: bin, LogLevel: "error", ExtraArgs: extra,
		ClientOptions: &client.Options{Logger: temporalx.SDKLogger(zap.NewNop())},
		Stdout:        io.Discard, Stderr: io.Discard,
	}
	if uiPort != 0 {
		opts.EnableUI, opts.UIPort = true, strconv.Itoa(uiPort)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return newITEnvOn(t, bin, srv.Client(), srv.FrontendHostPort(), t.TempDir(), gsm)
}

// newITEnvOn is the test's environment for a Temporal server at addr: its
// home, the variables the starter and worker read, a simulated checkpoint.
func newITEnvOn(t *testing.T, temporal string, c client.Client, addr, home, gsm string) *itEnv {
	e := &itEnv{t: t, c: c, addr: addr, temporal: temporal, home: home, starterBin: starterBinary(t), gsm8kDir: gsm}
	t.Setenv("TEMPORAL_ADDRESS", e.addr)
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	// starter commands keep sweep plans in the worker's ledger.
	t.Setenv("SWEEPFLOW_HOME", e.home)
	// The local-sim profile's roots follow SWEEPFLOW_DATA_DIR: keep them in
	// this test's home, not in the checkout's .sweepflow/.
	t.Setenv("SWEEPFLOW_DATA_DIR", e.home)
	t.Cleanup(func() { killServers(e.home) })
	out, err := exec.Command(e.starterBin, "sim", "checkpoint", "--dir",
		filepath.Join(e.home, "local-sim", "shared", "models", "DeepSeek-V4-Pro-0813"), "--shards", "3", "--shard-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))
	return e
}

// workerConfig is a worker for the simulated GB200 partition, fast enough
// for tests: a 0.002 time scale, 2 s perf runs, 40 GSM8K questions.
func (e *itEnv) workerConfig() *workers.Config {
	return &workers.Config{
		ClusterFile: "../configs/clusters/local-sim.yaml", Home: e.home, GSM8KDir: e.gsm8kDir,
		EvalMode: "lm-eval", EvalLimit: 40, Thresholds: "../configs/thresholds.yaml", StarterBin: e.starterBin,
		SimTimeScale: 0.002, SimAccuracy: 0.97, PerfDuration: 2 * time.Second, Control: true,
	}
}

// startWorker runs control and cluster workers in this process.
func (e *itEnv) startWorker() func() {
	cfg := e.workerConfig()
	acts, closeFn, err := cfg.Activities(context.Background(), zap.NewNop())
	require.NoError(e.t, err)
	w, err := workers.Start(e.c, workers.Options{ClusterName: cfg.ClusterName(), Control: true, Activities: acts})
	require.NoError(e.t, err)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			w.Stop()
			closeFn()
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// sweep plans the seed sweep for the simulated cluster and keeps the points
// whose exp-name contains one of keep.
func (e *itEnv) sweep(id string, keep []string, faults []string) *workflows.SweepInput {
	in, _, err := control.Build(control.Request{
		SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: "../configs/clusters/local-sim.yaml",
		ID: id, Faults: faults,
		Tuning: workflows.Tuning{RetryInterval: 200 * time.Millisecond, MaxAttempts: 2, HeartbeatTimeout: 5 * time.Second, OperatorTimeout: time.Hour},
	})
	require.NoError(e.t, err)
	var pts []point.Spec
	for _, p := range in.Points {
		for _, k := range keep {
			if strings.Contains(p.PointID, k) {
				pts = append(pts, p)
			}
		}
	}
	require.Len(e.t, pts, len(keep))
	in.Points = pts
	return in
}

// pointID is the point ID the planner gives a seed exp-name on a cluster
// (exp-name plus identity, so it depends on the cluster's backend).
func pointID(t testing.TB, cluster, expName string) string {
	t.Helper()
	in, _, err := control.Build(control.Request{SweepFile: "../configs/sweeps/dsv4-gb200-agentx.yaml", ClusterFile: cluster})
	require.NoError(t, err)
	for _, p := range in.Points {
		if p.ExpName == expName {
			return p.PointID
		}
	}
	t.Fatalf("no seed point %s", expName)
	return ""
}

func simID(t testing.TB, expName string) string {
	return pointID(t, "../configs/clusters/local-sim.yaml", expName)
}

func slurmID(t testing.TB, expName string) string {
	return pointID(t, "../configs/clusters/slurm-emu.yaml", expName)
}

func (e *itEnv) start(in *workflows.SweepInput) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := control.Start(ctx, e.c, in)
	require.NoError(e.t, err)
}

// wait blocks until the sweep workflow closes and returns its progress.
func (e *itEnv) wait(id string, within time.Duration) *workflows.SweepProgress {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res workflows.SweepProgress
	err := e.c.GetWorkflow(ctx, id, "").Get(ctx, &res)
	require.NoError(e.t, err, "sweep %s did not complete", id)
	// The result is slim (IDs, statuses, counts); the progress query of the
	// closed sweep has every point's row and final state, as status shows.
	pr, err := control.Query(ctx, e.c, id)
	require.NoError(e.t, err)
	require.Equal(e.t, res.Counts, pr.Counts, "sweep %s: result and progress query agree", id)
	require.Len(e.t, pr.Points, len(res.Points), "sweep %s: one result row per point", id)
	return pr
}

// list runs a visibility query.
func (e *itEnv) list(query string) []string {
	resp, err := e.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	require.NoError(e.t, err)
	var ids []string
	for _, x := range resp.GetExecutions() {
		ids = append(ids, x.GetExecution().GetWorkflowId())
	}
	sort.Strings(ids)
	return ids
}

func (e *itEnv) eventually(what string, within time.Duration, cond func() bool) {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// activityRuns counts the scheduled activities of a type in a workflow's
// history (a retry of one scheduled activity counts once per schedule).
func (e *itEnv) activityRuns(wid, typ string) (scheduled, attempts int) {
	it := e.c.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ids := map[int64]bool{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == typ {
			scheduled++
			ids[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && ids[a.GetScheduledEventId()] {
			attempts += int(a.GetAttempt())
		}
	}
	return scheduled, attempts
}

// cli runs the starter binary with args (in this test's environment:
// TEMPORAL_ADDRESS, SWEEPFLOW_HOME) and returns its stdout and exit status;
// its stderr goes to the test's.
func (e *itEnv) cli(args ...string) (string, int) {
	cmd := exec.Command(e.starterBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return out.String(), ee.ExitCode()
	}
	require.NoError(e.t, err, "starter %s", strings.Join(args, " "))
	return out.String(), 0
}

func (e *itEnv) ledger() *results.Store {
	s, err := results.Open(context.Background(), filepath.Join(e.home, "results.db"))
	require.NoError(e.t, err)
	e.t.Cleanup(func() { s.Close() })
	return s
}

// TestIntegrationOperatorGateAndRerun runs a small sweep end to end on the
// real dev server: one point's eval fails until an operator retries it (the
// perf stage must not run again), then a rerun of a sweep with an aborted
// point re-executes only what that point is missing.
func TestIntegrationOperatorGateAndRerun(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()

	// 1. Eval fault on the c128 point: 2 attempts = the stage's whole retry
	// budget, so the point parks for an operator.
	id := "it-gate"
	in := e.sweep(id, []string{"conc4_", "conc128_"}, []string{"conc128_:eval:2"})
	e.start(in)
	pointWID := workflows.PointWorkflowID(id, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc128_kvdram-hicache"))
	waiting := fmt.Sprintf(`SweepID = %q AND PointStatus = "awaiting-operator"`, id)
	e.eventually("the c128 point to wait for an operator", 3*time.Minute, func() bool { return len(e.list(waiting)) == 1 })
	require.Equal(t, []string{pointWID}, e.list(waiting))

	out, code := e.cli("status", id)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "awaiting-operator")
	require.Contains(t, out, "starter retry|skip|abort "+pointWID)

	cliOut, err := exec.Command(e.temporal, "workflow", "list", "--address", e.addr, "--query", waiting).CombinedOutput()
	require.NoError(t, err, string(cliOut))
	require.Contains(t, string(cliOut), pointWID)

	// An invalid decision is rejected; retry is accepted and resumes at eval.
	_, code = e.cli("skip", "no-such-point")
	require.NotEqual(t, 0, code)
	out, code = e.cli("retry", pointWID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "accepted retry for eval")

	pr := e.wait(id, 3*time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	perf, _ := e.activityRuns(pointWID, "Perf")
	require.Equal(t, 1, perf, "the perf stage must not run again after the eval retry")
	evals, attempts := e.activityRuns(pointWID, "Eval")
	require.Equal(t, 2, evals, "eval scheduled once, then once more after the operator's retry")
	require.Equal(t, 3, attempts, "2 failed attempts, then 1 successful")
	// The eval's spent budget is a failed attempt of class injected. (The
	// wait for the retry is booked as held only beyond the retried attempt,
	// taken to last as long as the failed budget: with a quick operator it
	// may be 0.)
	cats := e.requireNodeHoursAddUp(id)
	require.Greater(t, cats["failed:injected"], 0.0, "%v", cats)

	e.recordHistories(map[string]string{
		"sweep-gate.json":           id,
		"point-operator-retry.json": pointWID,
		"point-happy.json":          workflows.PointWorkflowID(id, simID(t, "dsv4_p1x8_d0x8_conc4_kvdram-hicache")),
	})

	store := e.ledger()
	n, err := store.CountStageOutputs(context.Background(), id, "perf")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = store.CountStageOutputs(context.Background(), id, "eval")
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the c128 point evaluates")

	// 2. A sweep whose c64 point fails for good (aborted at perf) ...
	id2 := "it-rerun"
	in2 := e.sweep(id2, []string{"conc4_", "conc64_"}, []string{"conc64_:perf"})
	e.start(in2)
	failing := workflows.PointWorkflowID(id2, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"))
	e.eventually("the c64 point to wait", 3*time.Minute, func() bool {
		return len(e.list(fmt.Sprintf(`SweepID = %q AND PointStatus = "awaiting-operator"`, id2))) == 1
	})
	out, code = e.cli("abort", "--sweep", id2, "--reason", "test")
	require.Equal(t, 0, code, out)
	pr2 := e.wait(id2, 3*time.Minute)
	require.Equal(t, 1, pr2.Counts[point.StatusAborted], "%+v", pr2.Counts)

	// ... is rerun: the good point reuses its ledger outputs (no allocation),
	// the failed one runs every stage.
	rerunIn := e.sweep("it-rerun-rerun1", []string{"conc4_", "conc64_"}, nil)
	rerunIn.ReuseFrom = []string{id2}
	e.start(rerunIn)
	pr3 := e.wait(rerunIn.SweepID, 3*time.Minute)
	require.Equal(t, 2, pr3.Counts[point.StatusCompleted], "%+v", pr3.Counts)
	good := workflows.PointWorkflowID(rerunIn.SweepID, simID(t, "dsv4_p1x8_d0x8_conc4_kvdram-hicache"))
	alloc, _ := e.activityRuns(good, "Allocate")
	require.Equal(t, 0, alloc, "a point whose outputs are all reusable needs no nodes")
	redo := workflows.PointWorkflowID(rerunIn.SweepID, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"))
	perf, _ = e.activityRuns(redo, "Perf")
	require.Equal(t, 1, perf)
	evals, _ = e.activityRuns(redo, "Eval")
	require.Equal(t, 1, evals)
	e.recordHistories(map[string]string{
		"point-aborted.json": failing,
		"point-reused.json":  good,
	})
}

// recordHistories exports closed workflows' histories with the Temporal CLI
// into testdata/histories of the package that replays them (nightly-*.json:
// nightly, the rest: workflows) when SWEEPFLOW_RECORD_HISTORIES=1, to catch
// non-deterministic changes.
func (e *itEnv) recordHistories(files map[string]string) {
	if os.Getenv("SWEEPFLOW_RECORD_HISTORIES") == "" {
		return
	}
	for name, wid := range files {
		pkg := "workflows"
		if strings.HasPrefix(name, "nightly-") {
			pkg = "nightly"
		}
		dir := filepath.Join("..", pkg, "testdata", "histories")
		require.NoError(e.t, os.MkdirAll(dir, 0o755))
		out, err := exec.Command(e.temporal, "workflow", "show", "--address", e.addr, "-w", wid, "--output", "json").Output()
		require.NoError(e.t, err, wid)
		require.NoError(e.t, os.WriteFile(filepath.Join(dir, name), out, 0o644))
		// Workflows that derive child IDs from their own ID replay under it.
		require.NoError(e.t, os.WriteFile(filepath.Join(dir, strings.TrimSuffix(name, ".json")+".wid"), []byte(wid), 0o644))
	}
}

var workerBuild struct {
	sync.Once
	path string
	err  error
}

func workerBinary(t *testing.T) string {
	workerBuild.Do(func() {
		dir := filepath.Dir(starterBinary(t))
		workerBuild.path = filepath.Join(dir, "worker")
		out, err := exec.Command("go", "build", "-o", workerBuild.path, "../worker").CombinedOutput()
		if err != nil {
			workerBuild.err = fmt.Errorf("go build worker: %v\n%s", err, out)
		}
	})
	require.NoError(t, workerBuild.err)
	return workerBuild.path
}

// startWorkerProcess runs the real worker binary against the dev server;
// extra flags come after (and override) the test's.
func (e *itEnv) startWorkerProcess(logName string, extra ...string) *exec.Cmd {
	cfg := e.workerConfig()
	args := append([]string{"--cluster", cfg.ClusterFile, "--home", e.home, "--gsm8k-dir", e.gsm8kDir,
		"--eval-limit", "40", "--thresholds", cfg.Thresholds, "--starter-bin", e.starterBin,
		"--sim-time-scale", "0.002", "--sim-accuracy", strconv.FormatFloat(cfg.SimAccuracy, 'f', -1, 64), "--perf-duration", "8s"}, extra...)
	cmd := exec.Command(workerBinary(e.t), args...)
	logf, err := os.Create(filepath.Join(e.home, logName))
	require.NoError(e.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	return cmd
}

// TestIntegrationWorkerKilledDuringPerf kills -9 the worker while a point is
// in its perf stage: the activity's heartbeat times out, a new worker picks
// the stage up, the sweep completes and the ledger holds no duplicate rows.
func TestIntegrationWorkerKilledDuringPerf(t *testing.T) {
	e := newITEnv(t)
	first := e.startWorkerProcess("worker1.log")

	id := "it-kill"
	in := e.sweep(id, []string{"conc4_", "conc64_"}, nil)
	in.Tuning.HeartbeatTimeout = 3 * time.Second
	e.start(in)
	pointWID := workflows.PointWorkflowID(id, simID(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"))
	e.eventually("the c64 point to be in its perf stage", 3*time.Minute, func() bool {
		return activityStarted(e.c, pointWID, "Perf")
	})
	require.NoError(t, first.Process.Kill()) // SIGKILL: no graceful stop
	_, _ = first.Process.Wait()
	e.startWorkerProcess("worker2.log")

	pr := e.wait(id, 4*time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	_, attempts := e.activityRuns(pointWID, "Perf")
	require.GreaterOrEqual(t, attempts, 2, "the perf stage ran again on the new worker")

	store := e.ledger()
	n, err := store.CountStageOutputs(context.Background(), id, "perf")
	require.NoError(t, err)
	require.Equal(t, 2, n, "one perf output per point, none duplicated")
	perf, err := store.Perf(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, perf, 2)
	for _, p := range perf {
		require.True(t, p.Simulated, "simulator results are labelled simulated")
		require.Greater(t, p.OutputTputPerGPU, 0.0)
	}
}

// TestIntegrationCLI drives a sweep only through the starter commands a user
// types: start (twice: the second attaches), status --json, abort --sweep,
// rerun (reuses the good point), and a schedule create/list/delete.
func TestIntegrationCLI(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()
	sweepFile := "testdata/agg-sweep.yaml"

	out, code := e.cli("sweep", "start", "--sweep", sweepFile, "--fast-retries", "--inject-fault", "conc4_:perf", "--json")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
		RunID   string `json:"run_id"`
		Points  int    `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.Equal(t, 2, started.Points)
	// Same plan, same ID: the second start attaches to the running sweep.
	out, code = e.cli("sweep", "start", "--sweep", sweepFile, "--fast-retries", "--inject-fault", "conc4_:perf", "--json")
	require.Equal(t, 0, code, out)
	var again struct {
		SweepID string `json:"sweep_id"`
		RunID   string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &again))
	require.Equal(t, started.SweepID, again.SweepID)
	require.Equal(t, started.RunID, again.RunID, "USE_EXISTING: no duplicate sweep")

	e.eventually("the c4 point to wait for an operator", 3*time.Minute, func() bool {
		out, code := e.cli("status", started.SweepID, "--json")
		var v control.SweepView
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			return false
		}
		for _, p := range v.Points {
			if p.Status == point.StatusAwaitingOperator && p.Stage == "perf" {
				return true
			}
		}
		return false
	})
	out, code = e.cli("abort", "--sweep", started.SweepID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "accepted abort for perf")
	out, code = e.cli("watch", started.SweepID, "--interval", "200ms")
	require.Equal(t, 1, code, "watch exits non-zero when the sweep did not complete: %s", out)

	out, code = e.cli("rerun", started.SweepID, "--fast-retries", "--wait")
	require.Equal(t, 0, code, out)
	rerunID := started.SweepID + "-rerun1"
	require.Contains(t, out, "sweep "+rerunID)
	pr := e.wait(rerunID, time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	reused := workflows.PointWorkflowID(rerunID, simID(t, "dsv4_p1x8_d0x8_conc1_kvdram-hicache"))
	alloc, _ := e.activityRuns(reused, "Allocate")
	require.Equal(t, 0, alloc, "the c1 point's perf is reused from the first run")
	redo := workflows.PointWorkflowID(rerunID, simID(t, "dsv4_p1x8_d0x8_conc4_kvdram-hicache"))
	perf, _ := e.activityRuns(redo, "Perf")
	require.Equal(t, 1, perf)

	out, code = e.cli("schedule", "create", "nightly-test", "--cron", "0 2 * * *", "--timezone", "Europe/Berlin", "--sweep", sweepFile)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "next run")
	list, err := exec.Command(e.temporal, "schedule", "list", "--address", e.addr).CombinedOutput()
	require.NoError(t, err, string(list))
	require.Contains(t, string(list), "nightly-test")
	out, code = e.cli("schedule", "list", "--json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"id":"nightly-test"`)
	out, code = e.cli("schedule", "delete", "nightly-test")
	require.Equal(t, 0, code, out)
	out, code = e.cli("schedule", "create", "bad", "--timezone", "Mars/Olympus", "--sweep", sweepFile)
	require.Equal(t, 2, code, out)
}

// killServers stops simulated engines a test left behind (a point cut off
// before its teardown): they run in their own process groups by design.
func killServers(home string) {
	pids, _ := filepath.Glob(filepath.Join(home, "local-cluster", "jobs", "*", "server.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}
