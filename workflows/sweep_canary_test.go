package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
)

// Images and backends of the canary tests.
const (
	sglangImage = "lmsysorg/sglang:test"
	vllmImage   = "vllm/vllm-openai:test"
)

// canarySpec is a point of image/backend with its planned node-minutes as
// `sweep start --canary` sets them (plan.NodeMinuteTimes.PointAlone with a
// 20 min bring-up, 5 min warmup, 10 min eval and a 60 min perf run).
func canarySpec(id, dep, image, backend string, nodes, conc int, eval bool) point.Spec {
	p := point.Spec{PointID: id, ConfigKey: "k-" + backend, Topology: dep, Conc: conc, Nodes: nodes, Eval: eval, SyntheticAL: 3.77,
		Identity: fmt.Sprintf("%s-c%d", dep, conc), Image: image, Framework: backend, DurationSec: 3600}
	p.NodeMinutes = plan.DefaultNodeMinuteTimes(20 * time.Minute).PointAlone(p)
	return p
}

// canaryInput is a canary sweep of pts on 18 nodes, its canaries picked as
// control.ApplyCanaries picks them.
func canaryInput(pts []point.Spec) SweepInput {
	return SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: pts, Tuning: fastTuning,
		Canaries: point.PickCanaries(pts, 18)}
}

func canaryOf(t *testing.T, pr *SweepProgress, image string) point.Canary {
	t.Helper()
	for _, c := range pr.Canaries {
		if c.Image == image {
			return c
		}
	}
	t.Fatalf("no canary for %s in %+v", image, pr.Canaries)
	return point.Canary{}
}

// TestCanaryPassedReleasesItsImageOnly: each image's cheapest point runs
// first; the image's other points start when it completed, and another
// image's points wait for their own canary only.
func TestCanaryPassedReleasesItsImageOnly(t *testing.T) {
	pts := []point.Spec{
		canarySpec("sg_c64", "dep8", sglangImage, "dynamo-sglang", 6, 64, true), // 6 x 115 = 690 node-min
		canarySpec("sg_c4", "agg4", sglangImage, "dynamo-sglang", 2, 4, false),  // 2 x 85 = 170
		canarySpec("sg_c1", "agg1", sglangImage, "dynamo-sglang", 2, 1, false),  // 170: the tie goes to the lower conc
		canarySpec("vl_c16", "vdep", vllmImage, "dynamo-vllm", 3, 16, true),     // 3 x 115 = 345
		canarySpec("vl_c8", "vdep8", vllmImage, "dynamo-vllm", 3, 8, false),     // 3 x 85 = 255
	}
	in := canaryInput(pts)
	require.Equal(t, []string{"sg_c1", "vl_c8"}, []string{in.Canaries[0].PointID, in.Canaries[1].PointID})
	require.InDelta(t, 170.0/60, in.Canaries[0].NodeHours, 1e-12)

	// The SGLang canary takes 3 h, the vLLM one 10 min, the rest 1 h.
	dur := map[string]time.Duration{"sg_c1": 3 * time.Hour, "vl_c8": 10 * time.Minute}
	spans, pr, _ := runSweep(t, in, func(p point.Spec) time.Duration {
		if d, ok := dur[p.PointID]; ok {
			return d
		}
		return time.Hour
	})
	require.Len(t, spans, 5)
	at := map[string]interval{}
	for _, s := range spans {
		at[s.id] = s
	}
	t0 := at["sg_c1"].start
	require.Equal(t, t0, at["vl_c8"].start, "both canaries start at once")
	for _, id := range []string{"sg_c4", "sg_c64"} {
		require.Equal(t, at["sg_c1"].end, at[id].start, "%s starts when the SGLang canary completed", id)
	}
	require.Equal(t, at["vl_c8"].end, at["vl_c16"].start, "vLLM's points wait for their own canary, not for SGLang's")
	require.Equal(t, 10*time.Minute, at["vl_c16"].start.Sub(t0))

	require.Equal(t, 5, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	for _, c := range pr.Canaries {
		require.Equal(t, point.CanaryPassed, c.Verdict, c.PointID)
		require.Zero(t, c.NotStarted)
		require.Zero(t, c.SavedNodeHours)
	}
}

// TestCanaryRunsApartFromItsDeployment: a canary that shares its
// deployment with other points runs alone on its own allocation; the rest
// of the deployment then shares one allocation and bring-up after it.
func TestCanaryRunsApartFromItsDeployment(t *testing.T) {
	pts := []point.Spec{
		canarySpec("d_c768", "twop1d", sglangImage, "dynamo-sglang", 16, 768, false),
		canarySpec("d_c1024", "twop1d", sglangImage, "dynamo-sglang", 16, 1024, false),
		canarySpec("d_c1280", "twop1d", sglangImage, "dynamo-sglang", 16, 1280, true),
	}
	in := canaryInput(pts)
	require.Equal(t, "d_c768", in.Canaries[0].PointID)
	f := newGroupFake()
	pr := runGroupSweepInput(t, f, in)
	require.Equal(t, 3, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
	require.Equal(t, []string{"allocate", "bringup:perf", "perf:d_c768", "teardown",
		"allocate", "bringup:perf", "perf:d_c1024", "probe", "perf:d_c1280", "bringup:eval", "eval:d_c1280", "teardown"}, f.order,
		"the canary ran and released its nodes before the rest of its deployment allocated")
	require.Equal(t, point.CanaryPassed, pr.Canaries[0].Verdict)
}

// TestCanaryFailedStartsNoneOfItsImage: an injected allocate fault that
// never clears makes the SGLang canary wait for an operator and abort at
// the operator timeout. None of SGLang's other points asks for nodes; they
// end not-started with the canary's reason, and the sweep reports their
// planned node-hours as saved. The vLLM points run as if nothing happened.
func TestCanaryFailedStartsNoneOfItsImage(t *testing.T) {
	pts := []point.Spec{
		canarySpec("sg_c1", "agg", sglangImage, "dynamo-sglang", 2, 1, false),   // 170 node-min: the canary
		canarySpec("sg_c4", "agg", sglangImage, "dynamo-sglang", 2, 4, false),   // 170, same deployment
		canarySpec("sg_c64", "dep8", sglangImage, "dynamo-sglang", 6, 64, true), // 690
		canarySpec("vl_c8", "vdep", vllmImage, "dynamo-vllm", 3, 8, false),
		canarySpec("vl_c16", "vdep", vllmImage, "dynamo-vllm", 3, 16, true),
	}
	names := make([]string, len(pts))
	for i, p := range pts {
		names[i] = p.PointID
	}
	faults, err := point.ParseFaults([]string{"sg_c1:allocate"}, names)
	require.NoError(t, err)
	pts[0].Faults = faults["sg_c1"]
	in := canaryInput(pts)
	require.Equal(t, "sg_c1", in.Canaries[0].PointID)

	f := newGroupFake()
	pr := runGroupSweepInput(t, f, in)
	require.Equal(t, map[string]int{point.StatusAborted: 1, point.StatusNotStarted: 2, point.StatusCompleted: 2}, pr.Counts)
	for _, id := range []string{"sg_c4", "sg_c64"} {
		require.NotContains(t, f.allocated, id, "%s asked for nodes after its canary failed", id)
	}
	require.Contains(t, f.allocated, "vl_c8")
	require.Contains(t, f.allocated, "vl_c16")

	sg := canaryOf(t, pr, sglangImage)
	require.Equal(t, point.CanaryFailed, sg.Verdict)
	require.Equal(t, "sg_c1 aborted at allocate: injected fault in allocate (3 of 1000000) (type: InjectedFault, retryable: true) (abort: operator timeout)",
		sg.Reason, "the canary's status, stage and last error (fastTuning: 3 attempts, then the operator timeout)")
	require.Equal(t, 2, sg.NotStarted)
	// (2 x (20+5+60) + 6 x (20+5+60+20+10)) / 60 = (170 + 690) / 60.
	require.InDelta(t, (170.0+690.0)/60, sg.SavedNodeHours, 1e-12)
	require.Equal(t, "14.33", point.FormatNodeHours(sg.SavedNodeHours))
	require.Equal(t, point.CanaryPassed, canaryOf(t, pr, vllmImage).Verdict)
	require.Zero(t, canaryOf(t, pr, vllmImage).SavedNodeHours)

	for _, p := range pr.Points {
		switch p.PointID {
		case "sg_c4", "sg_c64":
			require.Equal(t, point.StatusNotStarted, p.Status)
			require.Equal(t, "canary failed: "+sg.Reason, p.Outcome.Error)
			require.Nil(t, p.Outcome.State, "a point that never started has no state")
		case "vl_c8", "vl_c16":
			require.Equal(t, point.StatusCompleted, p.Status, p.PointID)
		}
	}
}

// TestCanaryVerdictsSurviveContinueAsNew: a drained run hands the verdicts
// and the held points on; the next run keeps holding or releasing them.
func TestCanaryVerdictsSurviveContinueAsNew(t *testing.T) {
	pts := []point.Spec{
		canarySpec("sg_c1", "agg1", sglangImage, "dynamo-sglang", 2, 1, false),
		canarySpec("sg_c4", "agg4", sglangImage, "dynamo-sglang", 2, 4, false),
		canarySpec("vl_c8", "vdep8", vllmImage, "dynamo-vllm", 3, 8, false),
		canarySpec("vl_c16", "vdep16", vllmImage, "dynamo-vllm", 3, 16, true),
	}
	in := canaryInput(pts)
	in.PointsPerRun = 2 // the two canaries, then continue as new
	env := instantPointsEnv()
	env.ExecuteWorkflow(SweepWorkflow, in)
	next := continuedInput(t, env)
	require.Len(t, next.Done, 2)
	require.ElementsMatch(t, []string{"sg_c4", "vl_c16"}, []string{next.Points[0].PointID, next.Points[1].PointID})
	for _, c := range next.Canaries {
		require.Equal(t, point.CanaryPassed, c.Verdict, c.PointID)
	}
}

func runGroupSweepInput(t *testing.T, f *groupFake, in SweepInput) *SweepProgress {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	env.RegisterWorkflow(DeploymentWorkflow)
	f.register(env)
	env.ExecuteWorkflow(SweepWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	return finalProgress(t, env)
}

// TestNoCanaryNoHold: without Canaries, points of one image start at once,
// as before canaries existed (the recorded histories depend on it).
func TestNoCanaryNoHold(t *testing.T) {
	pts := []point.Spec{
		canarySpec("sg_c1", "agg1", sglangImage, "dynamo-sglang", 2, 1, false),
		canarySpec("sg_c4", "agg4", sglangImage, "dynamo-sglang", 2, 4, false),
	}
	spans, pr, _ := runSweep(t, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: pts},
		func(point.Spec) time.Duration { return time.Hour })
	require.Equal(t, spans[0].start, spans[1].start)
	require.Nil(t, pr.Canaries)
	require.False(t, strings.Contains(fmt.Sprint(pr.Counts), point.StatusNotStarted))
}

// continuedInput is the input a sweep run continued as new with.
func continuedInput(t *testing.T, env *testsuite.TestWorkflowEnvironment) SweepInput {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next SweepInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// TestCanaryOnALaterPageOfAStoredPlan: a stored plan is loaded page by
// page; when every queued point waits for a canary on a later page, the
// sweep loads on until it finds it, runs it first, then the rest (or, when
// it fails, ends every other point of its image not-started, pages loaded
// later included).
func TestCanaryOnALaterPageOfAStoredPlan(t *testing.T) {
	const n, canaryAt = 450, 430 // pages of 200: the canary is on the third
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("canary fails %v", fails), func(t *testing.T) {
			pts := bigPoints(n)
			for i := range pts {
				pts[i].Image, pts[i].Framework, pts[i].NodeMinutes = sglangImage, "dynamo-sglang", 120
			}
			pts[canaryAt].NodeMinutes = 30
			canaries := point.PickCanaries(pts, 64)
			require.Equal(t, pts[canaryAt].PointID, canaries[0].PointID)

			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(SweepWorkflow)
			env.RegisterWorkflow(PointWorkflow)
			var a *activities.Activities
			env.RegisterActivity(a)
			env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(a.LoadPlanPage, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.PlanPageRequest) (activities.PlanPage, error) {
				lo := min(req.Offset, len(pts))
				return activities.PlanPage{Points: pts[lo:min(lo+req.Limit, len(pts))], Total: len(pts)}, nil
			})
			var started []string
			env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, pin PointInput) (*PointState, error) {
				started = append(started, pin.Point.PointID)
				if err := workflow.Sleep(ctx, time.Minute); err != nil {
					return nil, err
				}
				if fails && pin.Point.PointID == canaries[0].PointID {
					return nil, temporal.NewNonRetryableApplicationError("point failed", string(failure.ErrPointAborted), nil,
						PointState{PointID: pin.Point.PointID, Status: point.StatusAborted, FailedStage: "bringup", PointDetail: PointDetail{LastError: "health check timed out"}})
				}
				return &PointState{PointID: pin.Point.PointID, Status: point.StatusCompleted}, nil
			})
			env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "big", TaskQueue: "q", NodeBudget: 64, PlanRef: "stored",
				Tuning: fastTuning, Canaries: canaries})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var pr SweepProgress
			require.NoError(t, env.GetWorkflowResult(&pr))
			require.Equal(t, pts[canaryAt].PointID, started[0], "the canary starts first")
			c := pr.Canaries[0]
			if !fails {
				require.Len(t, started, n)
				require.Equal(t, map[string]int{point.StatusCompleted: n}, pr.Counts)
				require.Equal(t, point.CanaryPassed, c.Verdict)
				return
			}
			require.Len(t, started, 1, "no other point started")
			require.Equal(t, map[string]int{point.StatusAborted: 1, point.StatusNotStarted: n - 1}, pr.Counts)
			require.Equal(t, n-1, c.NotStarted)
			require.InDelta(t, float64(n-1)*120/60, c.SavedNodeHours, 1e-9)
			require.Equal(t, pts[canaryAt].PointID+" aborted at bringup: health check timed out", c.Reason)
		})
	}
}
