package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/report"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// The Slurm cases of the fault matrix (issue 14; the stack cases are
// deploy/composetest TestFaultMatrix) and of the failure classes (issue 27):
// one sweep of five seed points on the emulated partition.
//   - c64: one node of its set DOWN during perf (node-fail);
//   - c256: its holder job cancelled from outside (scancel) during perf
//     (cancelled). Both complete on fresh allocations;
//   - c1: its worker dies with a CUDA out-of-memory line (cuda-oom);
//   - c4: its worker never registers and the recipe's health budget (cut to
//     10 s in a copy of the configs) runs out (health-budget);
//   - c128: its engine sends no usage, so no output tokens are counted, and
//     the validity gate refuses the figures (invalid-result).
//
// The last three wait for an operator, who aborts them. Each class comes
// with its evidence in status, the ledger and the report; `starter stats`
// books node-minutes that add up to the allocations' in history, to the
// minute, with every class ranked. The ledger holds one row per point
// identity and stage, squeue ends empty, and it prints a figures table.
func TestSlurmFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	part := slurmemu.Start(t)
	e := newITEnv(t)
	// The slurm backend launches the recipe's process set; on the emulated
	// partition each process is a simulator role of this build.
	slurmemu.RequireRoles(t)
	// A copy of the configs in which the c4 recipe waits 10 s (2 x 5 s)
	// for its workers instead of 4 h.
	configs := filepath.Join(t.TempDir(), "configs")
	require.NoError(t, os.CopyFS(configs, os.DirFS("../configs")))
	c4Recipe := filepath.Join(configs, "recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c4-dspark6-hicache.yaml")
	raw, err := os.ReadFile(c4Recipe)
	require.NoError(t, err)
	short := strings.Replace(strings.Replace(string(raw), "max_attempts: 1440", "max_attempts: 2", 1), "interval_seconds: 10", "interval_seconds: 5", 1)
	require.NotEqual(t, string(raw), short, "the c4 recipe's health_check changed")
	require.NoError(t, os.WriteFile(c4Recipe, []byte(short), 0o644))
	profile := filepath.Join(configs, "clusters", "slurm-emu.yaml")
	out, err := exec.Command(e.starterBin, "sim", "checkpoint", "--dir",
		e.home+"/slurm-emu/shared/models/DeepSeek-V4-Pro-0813", "--shards", "3", "--shard-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))

	cfg := e.workerConfig()
	cfg.ClusterFile = profile
	cfg.PerfDuration = 6 * time.Second
	// Worker roles of three points fail as real engines do; the job name
	// holds the point ID ("conc1_" is c1's alone).
	cfg.SimCrash = "cuda-oom@job=conc1_,hang@job=conc4_,zero-usage@job=conc128_"
	e.startWorkerWith(e.c, cfg)

	// 6 + 12 nodes: both sets fit the 18-node partition at once.
	const (
		downPoint    = "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"    // 6 nodes
		scancelPoint = "dsv4_p1x16ep16dpa_d1x32ep32dpa_conc256_kvdram-hicache" // 12 nodes
		oomPoint     = "dsv4_p1x8_d0x8_conc1_kvdram-hicache"                   // 2 nodes
		hangPoint    = "dsv4_p1x8_d0x8_conc4_kvdram-hicache"                   // 2 nodes
		gatePoint    = "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc128_kvdram-hicache"   // 6 nodes
	)
	in := slurmSweep(t, filepath.Join(configs, "sweeps", "dsv4-gb200-agentx.yaml"), profile, "slurm-faults",
		downPoint, scancelPoint, oomPoint, hangPoint, gatePoint)
	pts := in.Points
	// Point IDs carry the recipe's digest: the c4 recipe of the copy is not
	// the repository's, so they come from this plan.
	idOf := map[string]string{}
	for _, p := range pts {
		idOf[p.ExpName] = p.PointID
	}
	e.start(in)
	t0 := time.Now()

	type fault struct {
		name, point, id, wid string
		at                   time.Time
		done                 bool
		// class is the failure class the lost attempt must carry, with
		// the job state in its evidence.
		class failure.Class
		state string
	}
	faults := []*fault{
		{name: "scontrol update state=down (one node of the set)", point: downPoint, class: failure.NodeFail, state: "NODE_FAIL"},
		{name: "scancel of the holder job", point: scancelPoint, class: failure.Cancelled, state: "CANCELLED"},
	}
	for _, f := range faults {
		f.id = idOf[f.point]
		f.wid = workflows.PointWorkflowID(in.SweepID, f.id)
	}
	inPerf := func(wid string) bool { return activityStarted(e.c, wid, "Perf") }
	// jobOf is the point's running holder job: id and node list.
	jobOf := func(pointID string) (id, nodes string, ok bool) {
		out, err := exec.Command("squeue", "-h", "-t", "RUNNING", "-o", "%i|%j|%N").Output()
		require.NoError(t, err)
		suffix := slurm.JobName("", in.SweepID, pointID) // ".<sweep>.<point>" after the profile's prefix
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Split(strings.TrimSpace(l), "|"); len(f) == 3 && strings.HasSuffix(f[1], suffix) {
				return f[0], f[2], true
			}
		}
		return "", "", false
	}
	lastLog := time.Now()
	e.eventually("both faults injected during perf", 8*time.Minute, func() bool {
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			for _, f := range faults {
				job, nodes, ok := jobOf(f.id)
				t.Logf("%s: in perf %v, running job %q on %q (%v); squeue: %v", f.point, inPerf(f.wid), job, nodes, ok, part.Squeue(t))
			}
		}
		all := true
		for _, f := range faults {
			if f.done {
				continue
			}
			all = false
			if !inPerf(f.wid) {
				continue
			}
			job, nodeList, ok := jobOf(f.id)
			if !ok {
				continue
			}
			if strings.HasPrefix(f.name, "scontrol") {
				nodes, err := exec.Command("scontrol", "show", "hostnames", nodeList).Output()
				require.NoError(t, err)
				hosts := strings.Fields(string(nodes))
				victim := hosts[len(hosts)-1]
				part.Run(t, "scontrol", "update", "nodename="+victim, "state=down", "reason=sweepflow-fault-matrix")
				t.Cleanup(func() { _ = exec.Command("scontrol", "update", "nodename="+victim, "state=resume").Run() })
				f.name += " " + victim
			} else {
				part.Run(t, "scancel", job)
			}
			f.at, f.done = time.Now(), true
			t.Logf("%s during perf of %s (job %s)", f.name, f.point, job)
		}
		return all
	})
	// The worker-side faults end at the operator gate: each is aborted
	// there, with its class and evidence in status first.
	type workerFault struct {
		name, point, id   string
		class             failure.Class
		stage, evidence   string
		statusClass, seen string
	}
	wfaults := []*workerFault{
		{name: "worker exits with a CUDA OOM line", point: oomPoint, class: failure.CUDAOOM, stage: "bringup",
			evidence: "torch.OutOfMemoryError: CUDA out of memory"},
		{name: "health budget runs out", point: hangPoint, class: failure.HealthBudget, stage: "bringup",
			evidence: "budget 10s ran out"},
		{name: "the gate refuses the result", point: gatePoint, class: failure.InvalidResult, stage: "perf",
			evidence: "output_tokens: 0 output tokens"},
	}
	for _, f := range wfaults {
		f.id = idOf[f.point]
	}
	lastLog = time.Now()
	e.eventually("the worker-side faults reach the operator gate", 12*time.Minute, func() bool {
		view, err := control.Collect(context.Background(), e.c, in.SweepID)
		require.NoError(t, err)
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			for _, pv := range view.Points {
				t.Logf("%s: %s, stage %s, failure %s %q", pv.PointID, pv.Status, pv.Stage, pv.FailureClass, pv.FailureExcerpt)
			}
			t.Logf("squeue: %v", part.Squeue(t))
		}
		all := true
		for _, f := range wfaults {
			if f.seen != "" {
				continue
			}
			all = false
			for _, pv := range view.Points {
				if pv.PointID == f.id && pv.Status == point.StatusAwaitingOperator {
					f.statusClass, f.seen = pv.FailureClass, pv.FailureExcerpt
					out, code := e.cli("abort", workflows.PointWorkflowID(in.SweepID, f.id), "--reason", "fault matrix: "+f.name)
					require.Equal(t, 0, code, out)
					t.Logf("%s: at the gate with %s %q; aborted", f.name, pv.FailureClass, pv.FailureExcerpt)
				}
			}
		}
		return all
	})
	pr := e.wait(in.SweepID, 8*time.Minute)
	assert.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr)
	for _, f := range wfaults {
		assert.Equal(t, string(f.class), f.statusClass, "%s: status failure_class at the gate", f.name)
		assert.Contains(t, f.seen, f.evidence, "%s: status failure_excerpt", f.name)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Slurm fault matrix (emulated partition): %d points, %s\n| fault | stage | recovery s | outcome |\n|---|---|---|---|\n", len(pts), time.Since(t0).Round(time.Second))
	for _, f := range faults {
		// Recovery: from the fault to the fresh allocation's request.
		var realloc []time.Time
		it := e.c.GetWorkflowHistory(context.Background(), f.wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "Allocate" {
				realloc = append(realloc, ev.GetEventTime().AsTime())
			}
		}
		require.Len(t, realloc, 2, "%s: a fresh allocation after the fault", f.name)
		rec := realloc[1].Sub(f.at)
		assert.Less(t, rec, 10*time.Second, "%s: noticed within a heartbeat timeout plus a retry", f.name)
		tears, _ := e.activityRuns(f.wid, "Teardown")
		assert.Equal(t, 2, tears, "%s: the lost allocation and the final one are both torn down", f.name)
		fmt.Fprintf(&b, "| %s | perf | %.1f | completed on a fresh allocation (%d teardowns) |\n", f.name, rec.Seconds(), tears)
	}
	t.Log("\n" + b.String())

	// The class and its evidence, in status (--json's fields), the ledger
	// (one row per failed attempt) and the report.
	view, err := control.Collect(context.Background(), e.c, in.SweepID)
	require.NoError(t, err)
	store := e.ledger()
	fails, err := store.StageFailures(context.Background(), in.SweepID)
	require.NoError(t, err)
	run, err := report.Load(context.Background(), store, in.SweepID, "")
	require.NoError(t, err)
	var page strings.Builder
	require.NoError(t, report.Render(&page, run))
	for _, f := range faults {
		var pv *control.PointView
		for i := range view.Points {
			if view.Points[i].PointID == f.id {
				pv = &view.Points[i]
			}
		}
		require.NotNil(t, pv, "%s in status", f.id)
		// The evidence names the job's state; a node failure may be seen
		// while the job is still COMPLETING with reason NodeDown, before
		// slurmctld moves it to NODE_FAIL (the same class).
		state := regexp.QuoteMeta("is " + f.state)
		if f.state == "NODE_FAIL" {
			state = `is (NODE_FAIL|COMPLETING \(NodeDown\))`
		}
		assert.Equal(t, string(f.class), pv.FailureClass, "%s: status failure_class", f.name)
		assert.Regexp(t, state, pv.FailureExcerpt, "%s: status failure_excerpt", f.name)
		var rows []results.StageFailure
		for _, r := range fails {
			if r.PointID == f.id {
				rows = append(rows, r)
			}
		}
		require.Len(t, rows, 1, "%s: one failed attempt in the ledger: %+v", f.name, rows)
		assert.Equal(t, f.class, rows[0].Class, "%s: ledger class", f.name)
		assert.Equal(t, "perf", rows[0].Stage)
		assert.Regexp(t, state, rows[0].Excerpt)
		assert.Contains(t, page.String(), "<code>"+string(f.class)+"</code>", "%s: class in the report", f.name)
		assert.Regexp(t, state, page.String(), "%s: evidence in the report", f.name)
		t.Logf("%s: class %s, evidence %q", f.name, rows[0].Class, rows[0].Excerpt)
	}

	for _, f := range wfaults {
		var rows []results.StageFailure
		for _, r := range fails {
			if r.PointID == f.id {
				rows = append(rows, r)
			}
		}
		require.NotEmpty(t, rows, "%s: failed attempts in the ledger", f.name)
		for _, r := range rows {
			assert.Equal(t, f.class, r.Class, "%s: ledger class", f.name)
			assert.Equal(t, f.stage, r.Stage, "%s: ledger stage", f.name)
			assert.Contains(t, r.Excerpt, f.evidence, "%s: ledger evidence", f.name)
		}
		assert.Contains(t, page.String(), "<code>"+string(f.class)+"</code>", "%s: class in the report", f.name)
		assert.Contains(t, page.String(), html.EscapeString(f.evidence), "%s: evidence in the report", f.name)
		t.Logf("%s: %d failed attempts, class %s, evidence %q", f.name, len(rows), rows[0].Class, rows[0].Excerpt)
	}
	if dir := os.Getenv("SWEEPFLOW_E2E_REPORT_DIR"); dir != "" {
		// For a person to look at (issue 27: the chart, in Chromium).
		require.NoError(t, os.WriteFile(filepath.Join(dir, "slurm-fault-matrix.html"), []byte(page.String()), 0o644))
	}

	// starter stats: the allocations' node-minutes in history, to the
	// minute, and every class's lost node-minutes ranked.
	e.requireNodeHoursAddUp(in.SweepID)
	statsOut, code := e.cli("stats", "--sweep", in.SweepID, "--json")
	require.Equal(t, 0, code, statsOut)
	var stats struct {
		Useful  float64 `json:"useful_fraction"`
		Classes []struct {
			Class       string  `json:"class"`
			Attempts    int     `json:"attempts"`
			NodeMinutes float64 `json:"node_minutes"`
		} `json:"failure_classes"`
	}
	require.NoError(t, json.Unmarshal([]byte(statsOut), &stats), statsOut)
	ranked := map[string]bool{}
	for i, c := range stats.Classes {
		ranked[c.Class] = true
		if i > 0 {
			assert.LessOrEqual(t, c.NodeMinutes, stats.Classes[i-1].NodeMinutes, "ranked by node-minutes lost")
		}
	}
	for _, c := range []failure.Class{failure.NodeFail, failure.Cancelled, failure.CUDAOOM, failure.HealthBudget, failure.InvalidResult} {
		assert.True(t, ranked[string(c)], "stats ranks %s: %s", c, statsOut)
	}
	assert.Greater(t, stats.Useful, 0.0)
	assert.Less(t, stats.Useful, 1.0)
	t.Logf("stats: useful fraction %.3f, classes %+v", stats.Useful, stats.Classes)

	// Nothing left: no job in squeue; one row per point identity and stage.
	require.Eventually(t, func() bool { return len(part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs left in squeue: %v", part.Squeue(t))
	perf, err := store.Perf(context.Background(), in.SweepID)
	require.NoError(t, err)
	assert.Len(t, perf, 2, "one perf row per completed point")
	for _, stage := range []string{"perf", "eval"} {
		n, err := store.CountStageOutputs(context.Background(), in.SweepID, stage)
		require.NoError(t, err)
		assert.Equal(t, 2, n, "one %s output per point identity", stage)
	}
}

// slurmSweep plans the sweep for an emulated-partition profile with the
// fault tests' quick retries and keeps the points of expNames, one each.
func slurmSweep(t *testing.T, sweepFile, profile, id string, expNames ...string) *workflows.SweepInput {
	in, _, err := control.Build(control.Request{SweepFile: sweepFile, ClusterFile: profile, ID: id,
		Tuning: workflows.Tuning{RetryInterval: time.Second, MaxAttempts: 3, HeartbeatTimeout: 5 * time.Second, OperatorTimeout: time.Hour}})
	require.NoError(t, err)
	var pts []point.Spec
	for _, p := range in.Points {
		if slices.Contains(expNames, p.ExpName) {
			pts = append(pts, p)
		}
	}
	require.Len(t, pts, len(expNames))
	in.Points = pts
	return in
}
