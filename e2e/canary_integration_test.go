package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// TestIntegrationCanary runs the backends sweep (Dynamo+TensorRT-LLM c8/c16,
// Dynamo+vLLM c8/c16, SGLang router c8) with `sweep start --canary` on the
// simulated partition, the vLLM canary made to fail: its allocate fails
// until an operator decides, and the operator aborts it. vLLM's other point
// never starts; `starter status --json` shows it not-started with the
// canary's reason and the node-hours it saved, the table and the report say
// the same, and the other images' points run, TensorRT-LLM's c16 only
// after its canary completed.
func TestIntegrationCanary(t *testing.T) {
	e := newITEnv(t)
	e.startWorker()
	sweepFile, cluster := "../configs/sweeps/dsv4-gb200-backends.yaml", "../configs/clusters/local-sim.yaml"

	// The plan as `sweep start --canary` makes it, to name the points.
	in, _, err := control.Build(control.Request{SweepFile: sweepFile, ClusterFile: cluster, Canary: true})
	require.NoError(t, err)
	canaryOf := func(backend string) point.Canary {
		for _, c := range in.Canaries {
			if c.Backend == backend {
				return c
			}
		}
		t.Fatalf("no %s canary in %+v", backend, in.Canaries)
		return point.Canary{}
	}
	others := func(backend, canary string) []point.Spec {
		var out []point.Spec
		for _, p := range in.Points {
			if p.Framework == backend && p.PointID != canary {
				out = append(out, p)
			}
		}
		return out
	}
	vl, trt := canaryOf("dynamo-vllm"), canaryOf("dynamo-trt")
	require.Contains(t, vl.PointID, "_conc8_", "the cheaper vLLM point: c8 has no eval")
	held := others("dynamo-vllm", vl.PointID)
	require.Len(t, held, 1)
	c16 := held[0]
	require.True(t, c16.Eval)
	// Its planned node-hours on an allocation of its own: nodes x (20 min
	// bring-up from local-sim.yaml + 5 min warmup + the row's perf duration
	// + 20 min eval restart + 10 min eval).
	wantSaved := float64(c16.Nodes) * (20 + 5 + float64(c16.DurationSec)/60 + 20 + 10) / 60

	out, code := e.cli("sweep", "start", "--sweep", sweepFile, "--cluster", cluster, "--canary", "--fast-retries",
		"--inject-fault", vl.PointID+":allocate", "--json")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID  string         `json:"sweep_id"`
		Points   int            `json:"points"`
		Canaries []point.Canary `json:"canaries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.Equal(t, 5, started.Points)
	require.Len(t, started.Canaries, 3, "TensorRT-LLM, vLLM and SGLang: one canary each")
	id := started.SweepID
	canaryWID := workflows.PointWorkflowID(id, vl.PointID)

	e.eventually("the vLLM canary to wait for an operator", 3*time.Minute, func() bool {
		v, ok := e.statusJSON(id)
		if !ok {
			return false
		}
		p := pointOf(v, vl.PointID)
		return p != nil && p.Status == point.StatusAwaitingOperator
	})
	// While it waits, its image's other point waits too.
	v, ok := e.statusJSON(id)
	require.True(t, ok)
	require.Equal(t, point.StatusPending, pointOf(v, c16.PointID).Status)
	out, code = e.cli("abort", canaryWID, "--reason", "canary test")
	require.Equal(t, 0, code, out)

	pr := e.wait(id, 4*time.Minute)
	require.Equal(t, map[string]int{point.StatusAborted: 1, point.StatusNotStarted: 1, point.StatusCompleted: 3}, pr.Counts)

	v, ok = e.statusJSON(id)
	require.True(t, ok)
	p := pointOf(v, c16.PointID)
	require.NotNil(t, p)
	require.Equal(t, point.StatusNotStarted, p.Status)
	require.True(t, strings.HasPrefix(p.Reason, "canary failed: "+vl.PointID+" aborted at allocate: injected fault in allocate"), p.Reason)
	require.InDelta(t, wantSaved, v.SavedNodeHours, 1e-9)
	var vlView point.Canary
	for _, c := range v.Canaries {
		if c.Backend == "dynamo-vllm" {
			vlView = c
		} else {
			require.Equal(t, point.CanaryPassed, c.Verdict, c.PointID)
		}
	}
	require.Equal(t, point.CanaryFailed, vlView.Verdict)
	require.Equal(t, 1, vlView.NotStarted)
	require.InDelta(t, wantSaved, vlView.SavedNodeHours, 1e-9)
	require.Equal(t, strings.TrimPrefix(p.Reason, "canary failed: "), vlView.Reason)

	// The held point never had a workflow.
	_, err = e.c.DescribeWorkflowExecution(context.Background(), workflows.PointWorkflowID(id, c16.PointID), "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "vLLM c16 must not have started: %v", err)
	// TensorRT-LLM's c16 started after its canary closed.
	trtRest := others("dynamo-trt", trt.PointID)
	require.Len(t, trtRest, 1)
	canaryDesc, err := e.c.DescribeWorkflowExecution(context.Background(), workflows.PointWorkflowID(id, trt.PointID), "")
	require.NoError(t, err)
	restDesc, err := e.c.DescribeWorkflowExecution(context.Background(), workflows.PointWorkflowID(id, trtRest[0].PointID), "")
	require.NoError(t, err)
	require.False(t, restDesc.GetWorkflowExecutionInfo().GetStartTime().AsTime().Before(canaryDesc.GetWorkflowExecutionInfo().GetCloseTime().AsTime()),
		"TensorRT-LLM c16 started before its canary completed")

	saved := point.FormatNodeHours(wantSaved)
	out, code = e.cli("status", id)
	require.Equal(t, 0, code, out)
	t.Logf("starter status %s:\n%s", id, out)
	require.Contains(t, out, "not-started (canary failed)")
	require.Contains(t, out, "3 canaries: 2 passed, 1 failed; 1 point not started, "+saved+" node-hours saved")

	html := filepath.Join(t.TempDir(), "report.html")
	out, code = e.cli("report", "--sweep", id, "--out", html)
	require.Equal(t, 0, code, out)
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Contains(t, string(page), "1 point not started, "+saved+" node-hours saved")
	require.Contains(t, string(page), vl.PointID+" aborted at allocate")

	e.recordHistories(map[string]string{"sweep-canary.json": id})
}
