package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/worker/workers"
	"github.com/sweepflow/sweepflow/workflows"
)

const slurmEmuProfile = "../configs/clusters/slurm-emu.yaml"

// Seed points by size on the emulated partition.
const (
	pt2Nodes  = "dsv4_p1x8_d0x8_conc4_kvdram-hicache"                   // TP8 agg, no eval
	pt6Nodes  = "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"    // 1P1D DEP8/DEP16, eval
	pt12Nodes = "dsv4_p1x16ep16dpa_d1x32ep32dpa_conc256_kvdram-hicache" // 1P1D DEP16/DEP32, eval
	pt16Nodes = "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache" // 2P1D DEP16/DEP32, no eval
)

// slurmIT is the Temporal dev-server harness plus the emulated partition and
// a worker serving configs/clusters/slurm-emu.yaml (or profile).
type slurmIT struct {
	*itEnv
	part       *slurmemu.Partition
	stopWorker func()
	// profile is the cluster profile the worker serves and sweeps plan
	// for; its recipes root is where the worker reads recipes.
	profile string
	// perfClient, when set, replaces the profile's perf-client for the
	// worker startWorker starts.
	perfClient string
}

func (s *slurmIT) startWorker(queueWait time.Duration) {
	if s.stopWorker != nil {
		s.stopWorker()
	}
	cfg := s.workerConfig()
	cfg.ClusterFile = s.profile
	cfg.PerfDuration = 4 * time.Second
	cfg.SlurmQueueWait = queueWait
	acts, closeFn, err := cfg.Activities(context.Background(), itWorkerLog(s.t))
	require.NoError(s.t, err)
	if s.perfClient != "" {
		acts.PerfClient = s.perfClient
	}
	w, err := workers.Start(s.c, workers.Options{ClusterName: cfg.ClusterName(), Control: true, Activities: acts})
	require.NoError(s.t, err)
	stopped := false
	s.stopWorker = func() {
		if !stopped {
			stopped = true
			w.Stop()
			closeFn()
		}
	}
}

// sweep plans the seed sweep for the emulated partition, keeping the named
// points (all of them when none is named).
func (s *slurmIT) sweep(t *testing.T, id string, keep ...string) *workflows.SweepInput {
	return s.sweepOf(t, "../configs/sweeps/dsv4-gb200-agentx.yaml", id, keep...)
}

// sweepOf plans a sweep file for the emulated partition, keeping only the
// named points when keep names any.
func (s *slurmIT) sweepOf(t *testing.T, file, id string, keep ...string) *workflows.SweepInput {
	return s.plan(t, control.Request{SweepFile: file, ID: id}, keep...)
}

// plan plans a sweep request for the emulated partition (the harness's
// profile and tuning), keeping only the named points when keep names any.
func (s *slurmIT) plan(t *testing.T, req control.Request, keep ...string) *workflows.SweepInput {
	req.ClusterFile = s.profile
	req.Tuning = workflows.Tuning{RetryInterval: 200 * time.Millisecond, MaxAttempts: 2, HeartbeatTimeout: 5 * time.Second, OperatorTimeout: time.Hour}
	in, _, err := control.Build(req)
	require.NoError(t, err)
	if len(keep) == 0 {
		return in
	}
	var pts []point.Spec
	for _, p := range in.Points {
		for _, k := range keep {
			if p.ExpName == k {
				pts = append(pts, p)
			}
		}
	}
	require.Len(t, pts, len(keep))
	in.Points = pts
	return in
}

// jobs lists the sweep's Slurm jobs: name, state, reason, node count.
type slurmJob struct {
	ID, Name, State, Reason string
	Nodes                   int
	NodeList                string
}

func sweepJobs(t *testing.T, sweepID string) []slurmJob {
	out, err := exec.Command("squeue", "-h", "-o", "%i|%j|%T|%r|%D|%N").CombinedOutput()
	require.NoError(t, err, string(out))
	var jobs []slurmJob
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) != 6 || !strings.Contains(f[1], "."+sweepID+".") {
			continue
		}
		n, _ := strconv.Atoi(f[4])
		jobs = append(jobs, slurmJob{ID: f[0], Name: f[1], State: f[2], Reason: f[3], Nodes: n, NodeList: f[5]})
	}
	return jobs
}

// settled asserts what every Slurm test must leave behind: no job in squeue
// and exactly one perf row (and eval row) per point.
func (s *slurmIT) settled(t *testing.T, in *workflows.SweepInput) {
	require.Eventually(t, func() bool { return len(s.part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs left in squeue: %v", s.part.Squeue(t))
	store := s.ledger()
	ctx := context.Background()
	perf, err := store.Perf(ctx, in.SweepID)
	require.NoError(t, err)
	require.Len(t, perf, len(in.Points), "one perf row per point")
	n, err := store.CountStageOutputs(ctx, in.SweepID, "perf")
	require.NoError(t, err)
	require.Equal(t, len(in.Points), n, "no duplicated perf output")
	evals := 0
	for _, p := range in.Points {
		if p.Eval {
			evals++
		}
	}
	n, err = store.CountStageOutputs(ctx, in.SweepID, "eval")
	require.NoError(t, err)
	require.Equal(t, evals, n, "no duplicated eval output")
}

// inStage waits until the point's activity of type typ has started.
func (s *slurmIT) inStage(t *testing.T, wid, typ string) {
	s.eventually(wid+" in "+typ, 3*time.Minute, func() bool { return activityStarted(s.c, wid, typ) })
}

// eventTimes returns when each activity of type typ was scheduled.
func (s *slurmIT) scheduledAt(t *testing.T, wid, typ string) []time.Time {
	it := s.c.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var at []time.Time
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == typ {
			at = append(at, ev.GetEventTime().AsTime())
		}
	}
	return at
}

// newSlurmIT starts (or joins) the emulated partition, the dev server and a
// worker of the slurm-emu profile, with the seed's checkpoint on the shared
// filesystem.
func newSlurmIT(t *testing.T) *slurmIT {
	part := slurmemu.Start(t)
	e := newITEnv(t)
	// The slurm backend launches the recipe's process set; on the emulated
	// partition each process is a simulator role of this build.
	slurmemu.RequireRoles(t)
	out, err := exec.Command(e.starterBin, "sim", "checkpoint", "--dir",
		filepath.Join(e.home, "slurm-emu", "shared", "models", "DeepSeek-V4-Pro-0813"), "--shards", "3", "--shard-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))
	s := &slurmIT{itEnv: e, part: part, profile: slurmEmuProfile}
	s.startWorker(0)
	t.Cleanup(func() { s.stopWorker() })
	return s
}

// TestSlurm runs sweep points through the slurm backend on the emulated
// 18-node GB200 partition (real slurmctld/slurmd) and the real Temporal dev
// server: a full seed point, a 16-node row under the node budget, two 12-node
// rows queueing in Slurm, node failure, external scancel and the queue-wait
// gate.
func TestSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	s := newSlurmIT(t)

	t.Run("seed point", func(t *testing.T) {
		in := s.sweep(t, "slurm-seed", pt6Nodes)
		s.start(in)
		wid := workflows.PointWorkflowID(in.SweepID, slurmID(t, pt6Nodes))
		defer s.logFailures(t, wid)
		pr := s.wait(in.SweepID, 3*time.Minute)
		require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr)
		for _, typ := range []string{"Allocate", "StageCheckpoint", "BringUp", "Warmup", "Perf", "Eval", "Upload", "Teardown"} {
			n, _ := s.activityRuns(wid, typ)
			require.GreaterOrEqual(t, n, 1, "stage %s ran", typ)
		}
		// The job directory on the shared root holds the holder and step logs.
		holder, _ := filepath.Glob(filepath.Join(s.home, "slurm-emu", "shared", "jobs", "sweepflow.slurm-seed."+slurmID(t, pt6Nodes), "holder-*.log"))
		require.Len(t, holder, 1)
		front, _ := filepath.Glob(filepath.Join(s.home, "slurm-emu", "shared", "jobs", "sweepflow.slurm-seed."+slurmID(t, pt6Nodes), "serve-*", "*_frontend_0.out"))
		require.NotEmpty(t, front)
		// Every node got its own node-local checkpoint copy.
		copies, _ := filepath.Glob(filepath.Join(s.home, "slurm-emu", "nvme", "gb200-*", "models", "DeepSeek-V4-Pro-0813", ".sweepflow-manifest.json"))
		require.GreaterOrEqual(t, len(copies), 6)
		s.settled(t, in)
	})

	t.Run("16-node row within the node budget", func(t *testing.T) {
		in := s.sweep(t, "slurm-big", pt16Nodes, pt2Nodes, pt6Nodes)
		var (
			mu      sync.Mutex
			maxSeen int
			saw16   bool
		)
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				total := 0
				for _, j := range sweepJobs(t, in.SweepID) {
					total += j.Nodes
					if j.Nodes == 16 && j.State == "RUNNING" {
						mu.Lock()
						saw16 = true
						mu.Unlock()
					}
				}
				mu.Lock()
				maxSeen = max(maxSeen, total)
				mu.Unlock()
			}
		}()
		s.start(in)
		pr := s.wait(in.SweepID, 4*time.Minute)
		close(stop)
		<-sampled
		require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr)
		require.LessOrEqual(t, pr.MaxInUse, 18)
		mu.Lock()
		defer mu.Unlock()
		require.True(t, saw16, "the 16-node job ran")
		require.LessOrEqual(t, maxSeen, 18, "the sweep never asked Slurm for more than 18 nodes")
		s.settled(t, in)
	})

	t.Run("two 12-node rows queue in Slurm", func(t *testing.T) {
		a, b := s.sweep(t, "slurm-q12a", pt12Nodes), s.sweep(t, "slurm-q12b", pt12Nodes)
		s.start(a)
		s.start(b)
		// One runs, the other waits for Resources, seen in Slurm and in the
		// point's heartbeat (the status shows the pending reason).
		var pendingSweep string
		s.eventually("one 12-node job running and the other PENDING (Resources)", 2*time.Minute, func() bool {
			ja, jb := sweepJobs(t, a.SweepID), sweepJobs(t, b.SweepID)
			if len(ja) != 1 || len(jb) != 1 {
				return false
			}
			switch {
			case ja[0].State == "RUNNING" && jb[0].State == "PENDING" && jb[0].Reason == "Resources":
				pendingSweep = b.SweepID
			case jb[0].State == "RUNNING" && ja[0].State == "PENDING" && ja[0].Reason == "Resources":
				pendingSweep = a.SweepID
			default:
				return false
			}
			return true
		})
		// The SDK throttles heartbeats, so the reason shows up after a beat.
		s.eventually("the pending reason in the point's heartbeat", 30*time.Second, func() bool {
			d, err := s.c.DescribeWorkflowExecution(context.Background(), workflows.PointWorkflowID(pendingSweep, slurmID(t, pt12Nodes)), "")
			require.NoError(t, err)
			for _, pa := range d.GetPendingActivities() {
				if pa.GetActivityType().GetName() == "Allocate" && pa.GetHeartbeatDetails() != nil {
					for _, p := range pa.GetHeartbeatDetails().GetPayloads() {
						if strings.Contains(string(p.GetData()), "PENDING (Resources)") {
							return true
						}
					}
				}
			}
			return false
		})
		// The waiting job starts only once the running one is torn down.
		for _, j := range []*workflows.SweepInput{a, b} {
			pr := s.wait(j.SweepID, 4*time.Minute)
			require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr)
		}
		first, second := a, b
		if pendingSweep == a.SweepID {
			first, second = b, a
		}
		tdown := s.scheduledAt(t, workflows.PointWorkflowID(first.SweepID, slurmID(t, pt12Nodes)), "Teardown")
		stage := s.scheduledAt(t, workflows.PointWorkflowID(second.SweepID, slurmID(t, pt12Nodes)), "StageCheckpoint")
		require.NotEmpty(t, tdown)
		require.NotEmpty(t, stage)
		require.True(t, stage[0].After(tdown[0]), "the second row got its nodes after the first was torn down")
		s.settled(t, a)
		s.settled(t, b)
	})

	t.Run("node failure during perf re-allocates", func(t *testing.T) {
		in := s.sweep(t, "slurm-nodefail", pt6Nodes)
		s.start(in)
		wid := workflows.PointWorkflowID(in.SweepID, slurmID(t, pt6Nodes))
		s.inStage(t, wid, "Perf")
		jobs := sweepJobs(t, in.SweepID)
		require.Len(t, jobs, 1)
		nodes, err := exec.Command("scontrol", "show", "hostnames", jobs[0].NodeList).Output()
		require.NoError(t, err)
		victim := strings.Fields(string(nodes))[len(strings.Fields(string(nodes)))-1]
		if strings.Contains(string(nodes), "gb200-05") {
			victim = "gb200-05"
		}
		s.part.Run(t, "scontrol", "update", "nodename="+victim, "state=down", "reason=sweepflow-test")
		t.Cleanup(func() { _ = exec.Command("scontrol", "update", "nodename="+victim, "state=resume").Run() })
		pr := s.wait(in.SweepID, 3*time.Minute)
		require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr)
		allocs, _ := s.activityRuns(wid, "Allocate")
		require.Equal(t, 2, allocs, "the point re-allocated after NODE_FAIL")
		tears, _ := s.activityRuns(wid, "Teardown")
		require.Equal(t, 2, tears, "the lost allocation and the final one are both torn down")
		s.settled(t, in)
	})

	t.Run("external scancel is detected and handled", func(t *testing.T) {
		// A point whose perf runs long enough (the 2-node one finishes in
		// well under a poll at the test's time scale) to be cancelled in it.
		in := s.sweep(t, "slurm-scancel", pt6Nodes)
		s.start(in)
		wid := workflows.PointWorkflowID(in.SweepID, slurmID(t, pt6Nodes))
		s.inStage(t, wid, "Perf")
		jobs := sweepJobs(t, in.SweepID)
		require.Len(t, jobs, 1)
		cancelled := time.Now()
		s.part.Run(t, "scancel", jobs[0].ID)
		pr := s.wait(in.SweepID, 3*time.Minute)
		require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr)
		at := s.scheduledAt(t, wid, "Allocate")
		require.Len(t, at, 2, "a fresh allocation after the scancel")
		require.Less(t, at[1].Sub(cancelled), 5*time.Second+2*time.Second,
			"the cancelled job was noticed within one heartbeat timeout (5 s) plus a retry interval")
		s.settled(t, in)
	})

	t.Run("queue wait past the limit goes to the operator gate", func(t *testing.T) {
		s.startWorker(3 * time.Second)
		blocker := s.part.Hold(t, 18)
		in := s.sweep(t, "slurm-queuewait", pt2Nodes)
		s.start(in)
		wid := workflows.PointWorkflowID(in.SweepID, slurmID(t, pt2Nodes))
		waiting := fmt.Sprintf(`SweepID = %q AND PointStatus = "awaiting-operator"`, in.SweepID)
		s.eventually("the point to wait for an operator at allocate", 2*time.Minute, func() bool { return len(s.list(waiting)) == 1 })
		out, code := s.cli("status", in.SweepID)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "queue wait")
		require.Empty(t, sweepJobs(t, in.SweepID), "the timed-out job was cancelled")
		s.part.Run(t, "scancel", blocker)
		out, code = s.cli("retry", wid)
		require.Equal(t, 0, code, out)
		pr := s.wait(in.SweepID, 3*time.Minute)
		require.Equal(t, 1, pr.Counts[point.StatusCompleted], "%+v", pr)
		s.settled(t, in)
	})
}

// logFailures logs every failed or timed-out activity attempt of a point
// (type and failure), so a point that recovered by itself still shows why.
func (s *slurmIT) logFailures(t *testing.T, wid string) {
	it := s.c.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	types := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Logf("%s: history: %v", wid, err)
			return
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			t.Logf("%s: %s failed: %s", wid, types[a.GetScheduledEventId()], a.GetFailure().GetMessage())
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
			t.Logf("%s: %s timed out: %s", wid, types[a.GetScheduledEventId()], a.GetFailure().GetMessage())
		}
	}
}

// itWorkerLog is the in-process worker's logger: none, or JSON lines
// appended to the file SWEEPFLOW_IT_WORKER_LOG names (debugging a slow or
// stuck emulated sweep).
func itWorkerLog(t *testing.T) *zap.Logger {
	path := os.Getenv("SWEEPFLOW_IT_WORKER_LOG")
	if path == "" {
		return zap.NewNop()
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.OutputPaths = []string{path}
	log, err := cfg.Build()
	require.NoError(t, err)
	return log
}
