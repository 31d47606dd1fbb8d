package accounting

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// m is minute x after t0.
func m(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Minute))) }

func run(stage, outcome string, from, to float64, fails ...failure.Attempt) results.StageRun {
	r := results.StageRun{Stage: stage, Outcome: point.Outcome(outcome), Rounds: 1, StartedAt: m(from), EndedAt: m(to), Failures: fails}
	if from < 0 {
		r.StartedAt, r.EndedAt = time.Time{}, time.Time{}
	}
	return r
}

func fail(class failure.Class, at float64) failure.Attempt {
	return failure.Attempt{Failure: failure.Failure{Class: class, Excerpt: "evidence of " + string(class)}, At: m(at)}
}

// ledger builds sweep s1 (and s0, where a reused perf was measured). Every
// figure below is in minutes from t0; the expected books are derived in
// TestBookLedger.
func ledger(t *testing.T) *results.Store {
	t.Helper()
	ctx := context.Background()
	s, err := results.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for _, sw := range []string{"s0", "s1"} {
		require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: sw, Status: "done", StartedAt: m(0)}))
	}
	require.NoError(t, s.PutSweepPlan(ctx, results.SweepPlan{SweepID: "s1", PlanJSON: []byte(`{}`), CreatedAt: m(0),
		Files: []results.PlanFile{{Path: "/x/configs/clusters/local-sim.yaml", Role: "cluster", Content: []byte("name: local-sim\n")}}}))
	pt := func(sweep, id, dep string, conc, nodes int, runs ...results.StageRun) {
		ident := fmt.Sprintf("%s-c%d", dep, conc)
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: sweep, PointID: id, Identity: ident, ConfigKey: "ck-" + dep,
			Conc: conc, Status: "done", UpdatedAt: m(100),
			SpecJSON: []byte(fmt.Sprintf(`{"point_id":%q,"nodes":%d,"deployment_hash":%q}`, id, nodes, dep))}))
		require.NoError(t, s.PutStageRuns(ctx, sweep, id, runs))
	}
	stored := func(sweep, id, ident, source string) {
		require.NoError(t, s.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: id, Identity: ident, SourceSweep: source, JSON: []byte(`{}`)}))
	}
	// Deployment aaaa, 2 nodes: a1 and a2 share one allocation.
	pt("s1", "a1", "aaaa", 1, 2,
		run("allocate", "ok", 0, 5),
		run("checkpoint", "ok", 5, 15),
		run("bringup", "ok", 15, 25),
		run("warmup", "ok", 25, 27),
		run("perf", "ok", 27, 57, fail(failure.InvalidResult, 32)), // refused at 32, operator retry, ok at 57
		run("upload", "ok", 58, 59))
	pt("s1", "a2", "aaaa", 2, 2,
		run("allocate", "shared", 57.5, 57.5),
		run("bringup", "shared", 57.5, 57.5),
		run("warmup", "ok", 58, 60),
		run("perf", "ok", 60, 70),
		run("teardown", "ok", 70, 71),
		run("upload", "ok", 71, 72))
	stored("s1", "a1", "aaaa-c1", "")
	stored("s1", "a2", "aaaa-c2", "")
	// Deployment bbbb, 1 node: two CUDA OOMs in bring-up, a node failure in
	// perf (re-allocation), then the eval fails and waits for an operator
	// past the node hold (teardown at 65) until a skip at 80.
	pt("s1", "b1", "bbbb", 4, 1,
		run("allocate", "ok", 0, 2),
		run("checkpoint", "ok", 2, 4),
		run("bringup", "ok", 4, 20, fail(failure.CUDAOOM, 6), fail(failure.CUDAOOM, 14)),
		run("warmup", "ok", 20, 21),
		run("perf", "allocation lost", 21, 25, fail(failure.NodeFail, 25)),
		run("teardown", "ok", 25, 26),
		run("allocate", "ok", 26, 30),
		run("checkpoint", "ok", 30, 31),
		run("bringup", "ok", 31, 34),
		run("warmup", "ok", 34, 35),
		run("perf", "ok", 35, 45),
		run("bringup", "ok", 45, 47),
		run("eval", "skipped", 47, 80, fail(failure.PythonError, 50)),
		run("teardown", "ok", 65, 66),
		run("upload", "ok", 80, 81))
	stored("s1", "b1", "bbbb-c4", "")
	// cccc reuses its perf from s0 (measured there in 12 node-minutes);
	// dddd reuses one from a sweep the ledger does not hold.
	pt("s0", "c0", "cccc", 8, 1, run("perf", "ok", 0, 12))
	pt("s1", "c1", "cccc", 8, 1, run("perf", "reused", 1, 1), run("upload", "ok", 1, 2))
	pt("s1", "d1", "dddd", 8, 1, run("perf", "reused", 1, 1), run("upload", "ok", 1, 2))
	for _, o := range []results.StageOutput{
		{SweepID: "s0", PointID: "c0", Identity: "cccc-c8", Stage: "perf", OutputJSON: []byte(`{}`)},
		{SweepID: "s1", PointID: "c1", Identity: "cccc-c8", Stage: "perf", OutputJSON: []byte(`{}`), SourceSweep: "s0"},
		{SweepID: "s1", PointID: "d1", Identity: "dddd-c8", Stage: "perf", OutputJSON: []byte(`{}`), SourceSweep: "gone"},
	} {
		_, err := s.PutStageOutput(ctx, o)
		require.NoError(t, err)
	}
	stored("s1", "c1", "cccc-c8", "s0")
	return s
}

func TestBookLedger(t *testing.T) {
	s := ledger(t)
	ps, sweeps, err := Load(context.Background(), s, Filter{Sweep: "s1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, sweeps)
	b := Book(ps, m(1000))
	// Node-minutes by hand (nodes x minutes):
	//  aaaa (2 nodes), one allocation [5, 71] = 132:
	//   staging [5,15] 20; bring-up [15,25] 20; warmup [25,27] 4 and a2's
	//   [57,60] 6 (the hand-over gap 57-58 goes to the run after it);
	//   perf: refused attempt [27,32] 10 to failed:invalid-result; the retry
	//   is taken to last as long (5 min), so [32,52] is the operator hold 40
	//   and [52,57] perf 10; a2's perf [60,70] 20; teardown [70,71] 2.
	//  bbbb (1 node), allocation [2,26] = 24: staging 2; bring-up: OOM
	//   [4,6] 2, hold [6,12] 6, OOM [12,14] 2, hold [14,18] 4, bring-up
	//   [18,20] 2; warmup 1; perf lost [21,25] 4 to failed:node-fail;
	//   teardown 1. Allocation [30,66] = 36: staging 1, bring-up 3,
	//   warmup 1, perf 10, eval restart [45,47] 2, eval's failed attempt
	//   [47,50] 3 to failed:python-error, hold [50,65] 15 until the
	//   release's teardown, teardown [65,66] 1; [66,80] held no node.
	//  cccc, dddd: no allocation; saved: 12 (s0's perf run) and unknown.
	want := map[string]float64{
		Staging: 20 + 2 + 1, BringUp: 20 + 2 + 3, Warmup: 4 + 6 + 1 + 1, Perf: 10 + 20 + 10,
		EvalRestart: 2, Teardown: 2 + 1 + 1, Held: 40 + 6 + 4 + 15,
		"failed:invalid-result": 10, "failed:cuda-oom": 2 + 2, "failed:node-fail": 4, "failed:python-error": 3,
	}
	got := map[string]float64{}
	for c, v := range b.Categories {
		if v != 0 {
			got[c] = v.Minutes()
		}
	}
	assert.InDeltaMapValues(t, want, got, 1e-9)
	assert.Len(t, got, len(want))
	assert.InDelta(t, 192.0, b.Total.Minutes(), 1e-9) // 132 + 24 + 36
	assert.Equal(t, b.Total, b.AllocationTime())
	require.Len(t, b.Allocations, 3)
	assert.InDelta(t, 40.0, b.Useful.Minutes(), 1e-9) // perf of a1, a2, b1 (b1's eval was skipped)
	assert.InDelta(t, 40.0/192, b.UsefulFraction(), 1e-12)

	var classes []string
	for _, c := range b.Classes {
		classes = append(classes, fmt.Sprintf("%s %d %.0f", c.Class, c.Attempts, c.NodeTime.Minutes()))
	}
	// cuda-oom before node-fail: same node time, more attempts.
	assert.Equal(t, []string{"invalid-result 1 10", "cuda-oom 2 4", "node-fail 1 4", "python-error 1 3"}, classes)

	sum := Summarize(b, sweeps)
	assert.Equal(t, SavedSummary{Stages: 2, NodeMinutes: 12, Unknown: 1}, sum.Saved)
	require.Len(t, sum.Timings, 2)
	// aaaa: queue 5 min, bring-up 10 min; bbbb: queue 2 and 4 min
	// (nearest rank: p50 2, p90 4), bring-up 3 min (the one with OOMs and
	// the eval restart are not bring-up samples).
	assert.Equal(t, TimingSummary{Cluster: "local-sim", Deployment: "aaaa", ConfigKey: "ck-aaaa",
		QueueN: 1, QueueP50: 300, QueueP90: 300, BringUpN: 1, BringUpP50: 600, BringUpP90: 600}, sum.Timings[0])
	assert.Equal(t, TimingSummary{Cluster: "local-sim", Deployment: "bbbb", ConfigKey: "ck-bbbb",
		QueueN: 2, QueueP50: 120, QueueP90: 240, BringUpN: 1, BringUpP50: 180, BringUpP90: 180}, sum.Timings[1])
	assert.Empty(t, sum.Notes)
}

// TestCategoriesSumToTotal: whatever the runs look like (overlaps, a run
// still going, a stage with no allocation before it, failures outside the
// run), the categories add up to the allocations' node time exactly.
func TestCategoriesSumToTotal(t *testing.T) {
	pts := []Point{
		{SweepID: "s", PointID: "x", Deployment: "d1", Nodes: 3, Runs: []results.StageRun{
			run("allocate", "ok", 0, 1.3),
			run("checkpoint", "ok", 1.1, 2.7), // overlaps the allocate
			run("bringup", "ok", 2.5, 9, fail(failure.LostWorker, 3), fail(failure.LostWorker, 3.2), fail(failure.HealthBudget, 99)),
			run("perf", "running", 9.5, -1),
		}},
		{SweepID: "s", PointID: "y", Deployment: "d2", Nodes: 5, Runs: []results.StageRun{
			run("perf", "ok", 0, 4), // no allocation: a note, not booked
			run("allocate", "ok", 4, 5),
			run("warmup", "failed", 5, 6.123, fail(failure.Transient, 5.5)),
			run("teardown", "ok", 7, 7.4),
			run("allocate", "ok", 8, 8.5),
			run("eval", "aborted", 8.5, 20, fail(failure.EngineExit, 1)),
		}},
	}
	pts[0].Runs[3].EndedAt = time.Time{} // still running: ends at now
	b := Book(pts, m(30))
	var sum NodeTime
	for _, v := range b.Categories {
		sum += v
	}
	assert.Equal(t, b.Total, sum)
	assert.Equal(t, b.AllocationTime(), b.Total)
	// x: [1.3, 30] x 3 nodes; y: [5, 7.4] and [8.5, 20] x 5 nodes.
	assert.InDelta(t, 28.7*3+2.4*5+11.5*5, b.Total.Minutes(), 1e-6)
	assert.Len(t, b.Notes, 1)
	s := Summarize(b, []string{"s"})
	var total float64
	for _, c := range s.CategoryOrder {
		total += s.Categories[c]
	}
	assert.Equal(t, s.TotalNodeMinutes, total)
	assert.Equal(t, len(s.Categories), len(s.CategoryOrder))
	assert.True(t, slices.IsSortedFunc(s.FailureClasses, func(a, b ClassSummary) int {
		switch {
		case a.NodeMinutes > b.NodeMinutes:
			return -1
		case a.NodeMinutes < b.NodeMinutes:
			return 1
		}
		return 0
	}))
}

// TestWriteText: the failure classes print ranked as booked, and a sweep
// without a failed attempt says so instead of leaving the section out.
func TestWriteText(t *testing.T) {
	var b strings.Builder
	sum := Summarize(Book(nil, m(1)), nil)
	require.NoError(t, sum.WriteText(&b))
	assert.Contains(t, b.String(), "failure classes by node-minutes lost: none (no failed attempt)")

	s := ledger(t)
	ps, sweeps, err := Load(context.Background(), s, Filter{Sweep: "s1"})
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, Summarize(Book(ps, m(1000)), sweeps).WriteText(&b))
	out := b.String()
	assert.Contains(t, out, "192.0 node-minutes (3.20 node-hours) in 3 allocations of 1 sweeps")
	assert.Contains(t, out, "useful fraction: 20.8 %")
	assert.NotContains(t, out, "none (no failed attempt)")
	i, j := strings.Index(out, "invalid-result  1"), strings.Index(out, "python-error    1")
	require.True(t, i > 0 && j > i, "ranked classes:\n%s", out)
}

// TestBookAttempts: with the attempt ledger, a failed or lost attempt's
// node time is its class's, a retry policy's backoff goes to the failure
// before it, the wait for an operator is held, and only the attempts that
// produced the stored figures are useful. The workflow's view of the same
// failures (the runs' Failures) is not counted a second time.
func TestBookAttempts(t *testing.T) {
	att := func(stage string, n int, from, to float64, outcome string, class failure.Class) results.StageAttempt {
		return results.StageAttempt{Stage: stage, Attempt: n, Outcome: outcome, Class: class, StartedAt: m(from), EndedAt: m(to)}
	}
	ok, failed, lost := results.AttemptOK, results.AttemptFailed, results.AttemptLost
	p := Point{SweepID: "s", PointID: "p", Deployment: "d", Nodes: 2, PerfStored: true, EvalStored: true,
		Runs: []results.StageRun{
			run("allocate", "ok", 0, 1),
			run("bringup", "ok", 1, 5),
			run("perf", "ok", 5, 20, fail(failure.LostWorker, 14)),
			run("eval", "ok", 20, 40, fail(failure.Transient, 22)),
			run("teardown", "ok", 40, 41),
		},
		Attempts: []results.StageAttempt{
			att("allocate", 1, 0, 1, ok, ""),
			att("bringup", 1, 1.01, 5, ok, ""),
			// Two injected failures and a killed worker in one budget;
			// the automatic retry's budget then succeeds.
			att("perf", 1, 5, 7, failed, failure.Injected),
			att("perf", 2, 8, 10, failed, failure.Injected),
			att("perf", 3, 11, 14, lost, failure.LostWorker),
			att("perf", 1, 16, 20, ok, ""),
			// A failure that ends its budget, the operator's retry at 30.
			att("eval", 1, 20, 22, failed, failure.Transient),
			att("eval", 1, 30, 35, ok, ""),
			att("teardown", 1, 40, 41, ok, ""),
		}}
	b := Book([]Point{p}, m(100))
	nm := func(minutes float64) NodeTime { return nodeTime(2, time.Duration(minutes*float64(time.Minute))) }
	want := map[string]NodeTime{
		BringUp:                      nm(4),
		FailedPrefix + "injected":    nm(6), // 5-7, backoff 7-8, 8-10, backoff 10-11
		FailedPrefix + "lost-worker": nm(5), // 11-14 lost, 14-16 the automatic retry's pause
		Perf:                         nm(4),
		FailedPrefix + "transient":   nm(2),
		Held:                         nm(8), // 22-30
		Eval:                         nm(10),
		Teardown:                     nm(1),
	}
	assert.Equal(t, want, b.Categories)
	assert.Equal(t, nm(40), b.Total)
	assert.Equal(t, b.AllocationTime(), b.Total)
	assert.Equal(t, nm(14), b.Useful, "perf 16-20 and eval 30-40: the attempts that made the figures")
	classes := map[failure.Class]ClassTotal{}
	for _, c := range b.Classes {
		classes[c.Class] = c
	}
	assert.Equal(t, ClassTotal{Class: failure.Injected, Attempts: 2, NodeTime: nm(6)}, classes[failure.Injected])
	assert.Equal(t, ClassTotal{Class: failure.LostWorker, Attempts: 1, NodeTime: nm(5)}, classes[failure.LostWorker])
	assert.Equal(t, ClassTotal{Class: failure.Transient, Attempts: 1, NodeTime: nm(2)}, classes[failure.Transient])
	assert.Len(t, b.Classes, 3)
	require.Len(t, b.BringUpTime, 1, "the bring-up worked at its first attempt")
}

// TestLoadAttachesAttempts: Load reads each point's attempts from the
// ledger, and a point with attempts is booked by them.
func TestLoadAttachesAttempts(t *testing.T) {
	s := ledger(t)
	ctx := context.Background()
	// a1's perf run (27-57): a refused attempt 27-32, then the operator's
	// retry 50-57.
	for _, a := range []results.StageAttempt{
		{ActivityID: "7", Attempt: 1, StartedAt: m(27), EndedAt: m(32), Outcome: results.AttemptFailed, Class: failure.InvalidResult},
		{ActivityID: "9", Attempt: 1, StartedAt: m(50), EndedAt: m(57), Outcome: results.AttemptOK},
	} {
		a.WorkflowID, a.RunID, a.SweepID, a.PointID, a.Stage = "s1/a1", "r", "s1", "a1", "perf"
		require.NoError(t, s.StartAttempt(ctx, a))
		_, err := s.EndAttempt(ctx, a)
		require.NoError(t, err)
	}
	ps, _, err := Load(ctx, s, Filter{Sweep: "s1"})
	require.NoError(t, err)
	var a1 *Point
	for i := range ps {
		if ps[i].PointID == "a1" {
			a1 = &ps[i]
		}
	}
	require.NotNil(t, a1)
	require.Len(t, a1.Attempts, 2)
	b := Book([]Point{*a1}, m(100))
	two := func(minutes float64) NodeTime { return nodeTime(2, time.Duration(minutes*float64(time.Minute))) }
	assert.Equal(t, two(5), b.Categories[FailedPrefix+"invalid-result"], "27-32: the refused attempt")
	assert.Equal(t, two(18), b.Categories[Held], "32-50: waiting for the operator")
	assert.Equal(t, two(7), b.Categories[Perf], "50-57: the attempt that made the figure")
}

// TestAdaptivePointsBookedApart: the warmup and perf of a point an
// adaptive search added go to their own category; the shared allocation,
// bring-up and teardown stay where they ran, and the total is unchanged.
func TestAdaptivePointsBookedApart(t *testing.T) {
	ctx := context.Background()
	s, err := results.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.UpsertSweep(ctx, results.Sweep{ID: "s", Status: "done", StartedAt: m(0)}))
	pt := func(id string, conc int, added bool, runs ...results.StageRun) {
		spec := fmt.Sprintf(`{"point_id":%q,"nodes":4,"deployment_hash":"eeee"`, id)
		if added {
			spec += `,"added":{"mode":"fill","deployment":"eeee","topology":"T","reason":"gap","seq":1}`
		}
		require.NoError(t, s.UpsertPoint(ctx, results.Point{SweepID: "s", PointID: id, Identity: fmt.Sprintf("eeee-c%d", conc),
			ConfigKey: "k", Conc: conc, Status: "completed", UpdatedAt: m(100), SpecJSON: []byte(spec + "}")}))
		require.NoError(t, s.PutStageRuns(ctx, "s", id, runs))
	}
	pt("planned", 32, false, run("allocate", "ok", 0, 1), run("bringup", "ok", 1, 11), run("warmup", "ok", 11, 12), run("perf", "ok", 12, 22))
	pt("added", 64, true, run("allocate", "shared", 22, 22), run("bringup", "shared", 22, 22),
		run("warmup", "ok", 22, 24), run("perf", "ok", 24, 34), run("teardown", "ok", 34, 35))
	ps, _, err := Load(ctx, s, Filter{Sweep: "s"})
	require.NoError(t, err)
	b := Book(ps, m(100))
	got := map[string]float64{}
	for c, v := range b.Categories {
		got[c] = v.Minutes()
	}
	// 4 nodes: bring-up 10 min, planned warmup 1 + perf 10, added warmup 2
	// + perf 10 (adaptive), teardown 1; allocation [1, 35].
	assert.InDeltaMapValues(t, map[string]float64{BringUp: 40, Warmup: 4, Perf: 40, Adaptive: 48, Teardown: 4}, got, 1e-9)
	assert.InDelta(t, 136.0, b.Total.Minutes(), 1e-9)
	sum := Summarize(b, []string{"s"})
	assert.Contains(t, sum.CategoryOrder, Adaptive)
	assert.InDelta(t, 136.0, sum.TotalNodeMinutes, 1e-9)

	// A sweep without added points shows no adaptive category.
	i := slices.IndexFunc(ps, func(p Point) bool { return p.PointID == "planned" })
	plain := Summarize(Book(ps[i:i+1], m(100)), []string{"s"})
	assert.Positive(t, plain.TotalNodeMinutes)
	assert.NotContains(t, plain.CategoryOrder, Adaptive)
}
