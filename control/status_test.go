package control

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// A stage that retried by itself after heartbeat timeouts shows in the
// table's notes and in --json, with the error it met.
func TestStatusShowsAutoRetries(t *testing.T) {
	var pv PointView
	pv.PointID, pv.Status = "p-c64", point.StatusCompleted
	pv.fromState(&workflows.PointState{PointDetail: workflows.PointDetail{Stage: "upload"}, Stages: []point.StageRun{
		{Stage: "allocate", Outcome: "ok"},
		{Stage: "perf", Outcome: "ok", AutoRetries: 2, Error: "timeout: Heartbeat"},
	}})
	require.Equal(t, []AutoRetryView{{Stage: "perf", Retries: 2, Error: "timeout: Heartbeat"}}, pv.AutoRetries)

	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	require.Contains(t, buf.String(), "p-c64: perf retried by itself 2x after timeout: Heartbeat")

	b, err := json.Marshal(pv)
	require.NoError(t, err)
	require.Contains(t, string(b), `"auto_retries":[{"stage":"perf","retries":2,"error":"timeout: Heartbeat"}]`)

	pv.fromState(&workflows.PointState{Stages: []point.StageRun{{Stage: "perf", Outcome: "ok"}}})
	require.Nil(t, pv.AutoRetries, "a refreshed state drops the old notes")
}

// The gate's note on nodes matches what the point holds: no hold advice
// for a point that failed before (or after) its allocation.
func TestStatusGateNodesNote(t *testing.T) {
	tests := []struct {
		name string
		pv   PointView
		want string
	}{
		{"holds nodes", PointView{PointDetail: workflows.PointDetail{NodesHeld: 16}}, "its 16 nodes are released after the node hold; starter hold s/p keeps them"},
		{"holds none", PointView{}, "it holds no nodes"},
		{"released", PointView{PointDetail: workflows.PointDetail{Released: true}}, "its nodes were released while it waited"},
		{"on hold", PointView{PointDetail: workflows.PointDetail{NodesHeld: 2, Hold: true}}, "holding its 2 nodes for debugging"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := tc.pv
			pv.PointID, pv.WorkflowID, pv.Status, pv.Stage, pv.LastError = "p", "s/p", point.StatusAwaitingOperator, "allocate", "x"
			var buf bytes.Buffer
			Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
			require.Contains(t, buf.String(), tc.want)
			if tc.pv.NodesHeld == 0 {
				require.NotContains(t, buf.String(), "starter hold")
			}
		})
	}
}

// A point whose final status the ledger could not record says so.
func TestStatusShowsRecordError(t *testing.T) {
	var pv PointView
	pv.PointID, pv.Status = "p-c64", point.StatusCompleted
	pv.fromState(&workflows.PointState{PointDetail: workflows.PointDetail{Stage: "done", RecordError: "database is locked"}})
	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	require.Contains(t, buf.String(), "! p-c64: the ledger still shows an older status: recording it failed: database is locked")
}

// A canary sweep's status says which canaries failed, why, and how many
// node-hours the points they kept from starting would have held.
func TestStatusShowsCanaries(t *testing.T) {
	reason := point.NotStartedReason("sg_c1 aborted at allocate: injected fault")
	var pv PointView
	pv.PointID, pv.Status, pv.Stage, pv.Reason = "sg_c4", point.StatusNotStarted, point.StatusNotStarted, reason
	v := &SweepView{SweepID: "s", Points: []PointView{pv}, SavedNodeHours: 14.5, Canaries: []point.Canary{
		{Image: "sglang:x", Backend: "dynamo-sglang", PointID: "sg_c1", Points: 3, NodeHours: 170.0 / 60, Verdict: point.CanaryFailed,
			Reason: "sg_c1 aborted at allocate: injected fault", NotStarted: 2, SavedNodeHours: 14.5},
		{Image: "vllm:x", Backend: "dynamo-vllm", PointID: "vl_c8", Points: 2, NodeHours: 4.25, Verdict: point.CanaryPassed},
		{Image: "trt:x", Backend: "dynamo-trt", PointID: "trt_c8", Points: 4, NodeHours: 4.25, Verdict: point.CanaryPending},
	}}
	var buf bytes.Buffer
	Print(&buf, v)
	out := buf.String()
	require.Contains(t, out, "not-started (canary failed)")
	require.Contains(t, out, "3 canaries: 1 passed, 1 failed, 1 pending; 2 points not started, 14.50 node-hours saved")
	require.Contains(t, out, "canary sglang:x (dynamo-sglang): sg_c1, 2.83 planned node-hours, failed: sg_c1 aborted at allocate: injected fault; 2 points not started, 14.50 node-hours saved")
	require.Contains(t, out, "canary vllm:x (dynamo-vllm): vl_c8, 4.25 planned node-hours, passed\n")
	require.Contains(t, out, "canary trt:x (dynamo-trt): trt_c8, 4.25 planned node-hours, pending; 3 points of its group wait for it")

	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.Contains(t, string(b), `"reason":"canary failed: sg_c1 aborted at allocate: injected fault"`)
	require.Contains(t, string(b), `"saved_node_hours":14.5`)
	require.Contains(t, string(b), `"verdict":"failed"`)
}

// A failed attempt's class is a table column, the gate line quotes its
// evidence, and --json has the class, the excerpt and every attempt.
func TestStatusShowsFailureClass(t *testing.T) {
	var pv PointView
	pv.PointID, pv.WorkflowID, pv.Status = "p-c64", "s/p-c64", point.StatusAwaitingOperator
	at := time.Date(2026, 1, 12, 3, 14, 10, 0, time.UTC)
	oom := failure.Failure{Class: failure.CUDAOOM, Excerpt: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}
	pv.fromState(&workflows.PointState{FailedStage: "bringup", PointDetail: workflows.PointDetail{Stage: "bringup",
		LastError: "decode_w0 ran out of memory", FailureClass: string(oom.Class), FailureExcerpt: oom.Excerpt},
		Stages: []point.StageRun{
			{Stage: "allocate", Outcome: "ok"},
			{Stage: "bringup", Outcome: "running", Failures: []failure.Attempt{{Failure: oom, At: at}}},
		}})
	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	out := buf.String()
	require.Regexp(t, `(?m)^POINT\s.*\sSTATUS\s+FAILURE\s+ATT\s`, out)
	require.Regexp(t, `(?m)^p-c64\s.*\sawaiting-operator\s+cuda-oom\s`, out)
	require.Contains(t, out, "    failure class cuda-oom: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")

	b, err := json.Marshal(pv)
	require.NoError(t, err)
	require.Contains(t, string(b), `"failure_class":"cuda-oom","failure_excerpt":"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"`)
	require.Contains(t, string(b), `"failures":[{"stage":"bringup","class":"cuda-oom","excerpt":"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB","at":"2026-01-12T03:14:10Z"}]`)

	buf.Reset()
	pv.FailureClass = ""
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{pv}})
	require.Regexp(t, `(?m)^p-c64\s.*\sawaiting-operator\s+-\s`, buf.String(), "no class: a dash")
}

// Added points are marked in the table and listed under their key's
// search with the deployment that served them and why; --json carries the
// searches and each added point's marker.
func TestStatusShowsAdaptive(t *testing.T) {
	added := &point.Added{Mode: point.AdaptiveFill, Deployment: "d1", Topology: "TP1 agg", Seq: 1,
		Reason: "fill: gap c32 (19.5 s) -> c256 (106 s) of median_e2el, x5.4 > x2; next to TP1 agg, whose server is up"}
	var planned, extra PointView
	planned.PointID, planned.Status, planned.Conc = "p-c32", point.StatusCompleted, 32
	extra.PointID, extra.Status, extra.Conc, extra.Added = "p-c64", point.StatusCompleted, 64, added
	k := adaptive.Key{Request: point.Adaptive{ConfigKey: "k", Mode: point.AdaptiveFill, MaxPoints: 3, MaxNodeHours: 2},
		Deployments: []adaptive.Deployment{{Key: "d1000000000000", Topology: "TP1 agg", State: adaptive.Done, Stop: "no gap wider than x2 left on the curve"}},
		Added:       []adaptive.AddedPoint{{PointID: "p-c64", Conc: 64, Added: *added}}, NodeMinutes: 30}
	v := &SweepView{SweepID: "s", Points: []PointView{planned, extra}, Adaptive: []adaptive.Key{k}}
	var buf bytes.Buffer
	Print(&buf, v)
	out := buf.String()
	require.Contains(t, out, "completed (added: fill)")
	require.Equal(t, 1, strings.Count(out, "(added: fill)"), "only the added point is marked")
	require.Contains(t, out, "adaptive k: fill gaps wider than x2, up to 3 added points and 2 node-hours\n  1 of 3 points added, 0.50 of 2 node-hours\n")
	require.Contains(t, out, "  TP1 agg (d10000000000): done: no gap wider than x2 left on the curve\n")
	require.Contains(t, out, "  + p-c64 c64 (completed): added by fill on TP1 agg: fill: gap c32 (19.5 s) -> c256 (106 s)")

	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.Contains(t, string(b), `"added":{"mode":"fill","deployment":"d1","topology":"TP1 agg"`)
	require.Contains(t, string(b), `"adaptive":[{"request":{"config_key":"k","mode":"fill"`)
}

// Each point's joules per output token shows beside its perf figures,
// starred when simulated; a power-invalid point keeps its perf figures and
// says why its power is invalid.
func TestStatusShowsJoulesPerToken(t *testing.T) {
	var ok, bad PointView
	ok.Perf = &point.PerfSummary{OutputTputPerGPU: 812.5, Simulated: true,
		Power: &energy.Figures{Valid: true, Simulated: true, JoulesPerOutputToken: 1.2345}}
	ok.PointID, ok.Status = "p-c64", point.StatusCompleted
	bad.Perf = &point.PerfSummary{OutputTputPerGPU: 640.25,
		Power: &energy.Figures{Reasons: []string{energy.ReasonDeviceMissing}}}
	bad.PointID, bad.Status = "p-c128", point.StatusCompleted
	var buf bytes.Buffer
	Print(&buf, &SweepView{SweepID: "s", Points: []PointView{ok, bad}})
	out := buf.String()
	require.Contains(t, out, "J/OUT TOK")
	require.Regexp(t, `p-c64 .* 812\.5\* .* 1\.234\* `, out)
	require.Regexp(t, `p-c128 .* 640\.2 .* power-invalid: expected_device_missing`, out)
}
