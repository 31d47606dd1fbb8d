package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// seedPoints is the seed sweep's shape: five deployments of their own and
// one shared by three points; four points evaluate.
func seedPoints() []point.Spec {
	var pts []point.Spec
	for i, c := range []int{1, 4, 64, 128, 256, 768, 1024, 1280} {
		dep := fmt.Sprintf("d%d", i)
		if c >= 768 {
			dep = "shared"
		}
		pts = append(pts, point.Spec{PointID: fmt.Sprintf("c%d", c), DeploymentHash: dep, Eval: c == 64 || c == 128 || c == 256 || c == 1280})
	}
	return pts
}

// TestDrawIsSeeded: the same seed draws the same faults, another seed
// others; one of each kind comes first; every fault has a point and stage
// of its own that the point runs, and its expected class.
func TestDrawIsSeeded(t *testing.T) {
	pts := seedPoints()
	a, err := Draw(7, pts, AllKinds, 0)
	require.NoError(t, err)
	b, err := Draw(7, pts, AllKinds, 0)
	require.NoError(t, err)
	assert.Equal(t, a, b, "same seed, same faults")
	c, err := Draw(8, pts, AllKinds, 0)
	require.NoError(t, err)
	assert.NotEqual(t, a, c)
	require.Len(t, a, len(AllKinds))
	for i, f := range a {
		assert.Equal(t, AllKinds[i], f.Kind, "one of each kind first")
	}
	many, err := Draw(3, pts, AllKinds, 12)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range many {
		key := f.Point + "/" + f.Stage
		assert.False(t, seen[key], "one fault per point and stage: %s", key)
		seen[key] = true
		switch f.Kind {
		case EngineCrash, BringUpHang:
			assert.Equal(t, point.StageBringUp, f.Stage)
			assert.NotContains(t, []string{"c768", "c1024", "c1280"}, f.Point, "a shared deployment's point may not bring its own server up")
		case StreamCut, NodeFailure:
			assert.Equal(t, point.StagePerf, f.Stage)
		}
		if f.Stage == point.StageEval {
			assert.Contains(t, []string{"c64", "c128", "c256", "c1280"}, f.Point)
		}
		want := map[Kind]failure.Class{NodeFailure: failure.NodeFail, BringUpHang: failure.HealthBudget, StreamCut: failure.Transient,
			WorkerKill: failure.LostWorker, ServerRestart: failure.LostWorker}[f.Kind]
		if f.Kind == EngineCrash {
			want = failure.Class(f.Crash)
			assert.Contains(t, crashes, f.Crash)
		}
		assert.Equal(t, want, f.Expect)
	}
	_, err = Draw(1, pts[:1], AllKinds, 9)
	assert.ErrorContains(t, err, "do not fit")
	_, err = Draw(1, pts, nil, 0)
	assert.Error(t, err)
}

// TestKinds: the local simulated cluster has no Slurm roles to crash or
// nodes to fail; worker kills and server restarts need a process to act on.
func TestKinds(t *testing.T) {
	assert.Equal(t, AllKinds, Kinds(true, true, true))
	assert.Equal(t, []Kind{StreamCut, WorkerKill}, Kinds(false, true, false))
	k, err := ParseKinds("stream-cut, worker-kill,stream-cut")
	require.NoError(t, err)
	assert.Equal(t, []Kind{StreamCut, WorkerKill}, k)
	_, err = ParseKinds("meteor")
	assert.ErrorContains(t, err, `unknown chaos kind "meteor"`)
}

// TestApply: the faults a point's attempt carries out go into its spec
// for the stage's first attempt; external ones do not.
func TestApply(t *testing.T) {
	pts := []point.Spec{{PointID: "c1"}, {PointID: "c4"}}
	Apply([]Fault{
		{Kind: EngineCrash, Point: "c1", Stage: point.StageBringUp, Crash: "nccl"},
		{Kind: StreamCut, Point: "c4", Stage: point.StagePerf},
		{Kind: WorkerKill, Point: "c4", Stage: point.StageBringUp},
	}, pts)
	assert.Equal(t, []point.Fault{{Stage: point.StageBringUp, Times: 1, Chaos: "crash:nccl"}}, pts[0].Faults)
	assert.Equal(t, []point.Fault{{Stage: point.StagePerf, Times: 1, Chaos: point.ChaosStreamCut}}, pts[1].Faults)
}

// TestReconcile: the ledger matches a run when each fault made its
// attempts and no failed attempt is unexplained; a kill's other hits are
// lost too, and a fault whose attempt a kill overtook is noted.
func TestReconcile(t *testing.T) {
	row := func(p, stage string, n int, outcome string, c failure.Class) results.StageAttempt {
		return results.StageAttempt{PointID: p, Stage: stage, Attempt: n, Outcome: outcome, Class: c}
	}
	inj := []Injection{
		{Fault: Fault{Kind: EngineCrash, Point: "c1", Stage: "bringup", Crash: "cuda-oom", Expect: failure.CUDAOOM}},
		{Fault: Fault{Kind: NodeFailure, Point: "c64", Stage: "perf", Expect: failure.NodeFail}, Attempt: 1, Node: "gb200-07"},
		{Fault: Fault{Kind: WorkerKill, Point: "c4", Stage: "perf", Expect: failure.LostWorker}, Attempt: 1,
			Hit: []Attempt{{"c4", "perf", 1}, {"c128", "bringup", 1}, {"c256", "bringup", 1}}},
		{Fault: Fault{Kind: BringUpHang, Point: "c128", Stage: "bringup", Expect: failure.HealthBudget}},
		{Fault: Fault{Kind: ServerRestart, Point: "c256", Stage: "eval", Expect: failure.LostWorker}, Missed: "the sweep ended before eval ran on the point"},
	}
	ledger := []results.StageAttempt{
		row("c1", "bringup", 1, results.AttemptFailed, failure.CUDAOOM),
		row("c1", "bringup", 2, results.AttemptOK, ""),
		row("c64", "perf", 1, results.AttemptFailed, failure.NodeFail),
		row("c64", "perf", 2, results.AttemptFailed, failure.NodeFail), // the budget spent on the lost allocation
		row("c4", "perf", 1, results.AttemptLost, failure.LostWorker),
		row("c128", "bringup", 1, results.AttemptLost, failure.LostWorker), // the hang's attempt, overtaken
		row("c256", "bringup", 1, results.AttemptOK, ""),                   // finished as the worker died
	}
	mis, notes := Reconcile(inj, ledger)
	assert.Empty(t, mis)
	assert.Len(t, notes, 2)
	assert.Contains(t, strings.Join(notes, "\n"), "overtaken")
	assert.Contains(t, strings.Join(notes, "\n"), "finished anyway")

	// A kill that ended the stage's first attempt before its body ran: the
	// next attempt carries the crash.
	mis, notes = Reconcile([]Injection{inj[0], {Fault: Fault{Kind: WorkerKill, Point: "c4", Stage: "perf", Expect: failure.LostWorker},
		Attempt: 1, Hit: []Attempt{{"c4", "perf", 1}, {"c1", "bringup", 1}}}}, []results.StageAttempt{
		row("c1", "bringup", 1, results.AttemptLost, failure.LostWorker),
		row("c1", "bringup", 2, results.AttemptFailed, failure.CUDAOOM),
		row("c4", "perf", 1, results.AttemptLost, failure.LostWorker),
	})
	assert.Empty(t, mis)
	assert.Empty(t, notes)

	// An attempt that started after the kill's snapshot read its point but
	// before the worker died (the GB200 fleet chaos run, seed 35: a
	// teardown) is lost to the kill; one that started after it is not.
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	kill := Injection{Fault: Fault{Kind: WorkerKill, Point: "c4", Stage: "perf", Expect: failure.LostWorker}, Attempt: 1,
		At: at, Landed: at.Add(2 * time.Second), Hit: []Attempt{{"c4", "perf", 1}}}
	lost := func(p, stage string, started, ended time.Duration) results.StageAttempt {
		a := row(p, stage, 1, results.AttemptLost, failure.LostWorker)
		a.StartedAt, a.EndedAt = at.Add(started), at.Add(ended)
		return a
	}
	mis, notes = Reconcile([]Injection{kill}, []results.StageAttempt{
		lost("c4", "perf", -time.Minute, 12*time.Second),
		lost("c1", "teardown", time.Second, 12*time.Second),
	})
	assert.Empty(t, mis)
	assert.Equal(t, []string{kill.Fault.String() + ": attempt 1 of teardown on c1 started as it landed and was lost to it"}, notes)
	mis, _ = Reconcile([]Injection{kill}, []results.StageAttempt{
		lost("c4", "perf", -time.Minute, 12*time.Second),
		lost("c1", "teardown", 3*time.Second, 20*time.Second),
	})
	require.Len(t, mis, 1)
	assert.Contains(t, mis[0], "attempt 1 of teardown on c1 failed (lost-worker")

	// An unexplained failure and a fault without its attempt are both named.
	mis, _ = Reconcile(inj[:1], []results.StageAttempt{row("c4", "warmup", 1, results.AttemptFailed, failure.Transient)})
	require.Len(t, mis, 2)
	assert.Contains(t, mis[0], "no failed bringup attempt of class cuda-oom")
	assert.Contains(t, mis[1], "no fault of the run explains it")
}

// TestProcessRestart: a process named by its pid file is stopped and
// started again with its command line, environment, directory and output,
// and the pid file follows it.
func TestProcessRestart(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.log")
	f, err := os.Create(out)
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", `echo "up $CHAOS_TEST_MARK $(pwd)"; exec sleep 60`)
	cmd.Env = append(os.Environ(), "CHAOS_TEST_MARK=m42")
	cmd.Dir, cmd.Stdout = dir, f
	require.NoError(t, cmd.Start())
	f.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pidFile := filepath.Join(dir, "p.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	time.Sleep(200 * time.Millisecond) // sh has exec'ed sleep

	p, err := OpenProcess("test", pidFile)
	require.NoError(t, err)
	assert.Equal(t, cmd.Process.Pid, p.Pid())
	go func() { _ = cmd.Wait() }()
	require.NoError(t, p.Stop(syscall.SIGKILL, 0))
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Stop(syscall.SIGKILL, 0) })
	assert.NotEqual(t, cmd.Process.Pid, p.Pid())
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(p.Pid()), string(b))
	var args []byte
	require.Eventually(t, func() bool { // until the child has exec'ed
		args, err = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		return err == nil && len(args) > 0
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "sleep\x0060\x00", string(args), "the same command line (sh had exec'ed sleep)")
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.Pid()))
	require.NoError(t, err)
	assert.Equal(t, dir, cwd)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	require.NoError(t, err)
	assert.Contains(t, string(env), "CHAOS_TEST_MARK=m42")
	_, err = OpenProcess("test", "no-such-file")
	assert.ErrorContains(t, err, "neither a pid nor a readable pid file")
}
