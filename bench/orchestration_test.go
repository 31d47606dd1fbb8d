package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

func TestBenchPoints(t *testing.T) {
	tmpl := []point.Spec{
		{PointID: "a", Identity: "aaa-c8", Nodes: 4, Row: json.RawMessage(`{"x":1}`), Faults: []point.Fault{{Stage: "perf", Times: 1}}},
		{PointID: "b", Identity: "not an identity", Nodes: 16},
	}
	pts := benchPoints(tmpl, 5, 1)
	require.Len(t, pts, 5)
	ids := map[string]bool{}
	deps := map[string]bool{}
	for i, p := range pts {
		assert.Equal(t, 1, p.Nodes, "every point takes one node")
		assert.Empty(t, p.Faults, "no injected faults in a benchmark")
		ids[p.PointID], ids[p.Identity] = true, true
		deps[p.DeploymentKey()] = true
		assert.Equal(t, tmpl[i%2].Row, p.Row, "the row is kept: it sizes the inputs")
	}
	assert.Len(t, ids, 10, "point IDs and identities are unique")
	assert.Len(t, deps, 5, "one deployment per point")
	assert.Equal(t, "a-b00000", pts[0].PointID)
	assert.Equal(t, "b00000aaa-c0", pts[0].Identity)
	assert.Equal(t, "b00003-c3", pts[3].Identity, "an unparsable template identity is replaced")
	assert.Equal(t, 4, tmpl[0].Nodes, "the template is not modified")

	shared := benchPoints(tmpl, 6, 3)
	deps = map[string]bool{}
	for _, p := range shared {
		deps[p.DeploymentKey()] = true
	}
	assert.Len(t, deps, 2, "three points per deployment")
	assert.Equal(t, shared[0].DeploymentKey(), shared[2].DeploymentKey())
	assert.Equal(t, "a-b00002", shared[2].PointID, "consecutive points of a deployment repeat one template point")
	assert.NotEqual(t, workflows.DeploymentWorkflowID("s", shared[0].DeploymentKey()),
		workflows.DeploymentWorkflowID("s", shared[3].DeploymentKey()), "deployment workflow IDs differ")
}

func payloadOf(s string) *commonpb.Payloads {
	return &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(s)}}}
}

// TestAnalyzePoint feeds a hand-built history: two activities, the second
// starting 40 ms after the first completed, and a retried one whose start
// precedes the previous completion (not a transition).
func TestAnalyzePoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	sched := func(id int64, ms int, name, input string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(ms), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: name}, Input: payloadOf(input)}}}
	}
	started := func(id, s int64, ms int) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(ms), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: s}}}
	}
	completed := func(id, s int64, ms int) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(ms), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
			Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: s}}}
	}
	row := `{"model":"dsv4","conc":64}`
	evs := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		sched(2, 10, "Allocate", `{"point_id":"p","row":`+row+`}`),
		started(3, 2, 10),
		completed(4, 2, 30),
		sched(5, 60, "StageCheckpoint", `{"point":{"row":`+row+`},"alloc":{}}`),
		started(6, 5, 70),
		completed(7, 5, 75),
		sched(8, 76, "Teardown", `{"point":{}}`),
		started(9, 8, 74), // clock skew: not counted
		completed(10, 8, 80),
	}
	ps := analyzePoint(evs)
	assert.Equal(t, 10, ps.events)
	require.Len(t, ps.acts, 3)
	assert.Equal(t, []float64{40}, ps.transitionsMs)
	assert.Equal(t, "Allocate", ps.acts[0].name)
	assert.Equal(t, len(`{"point_id":"p","row":`+row+`}`), ps.acts[0].inputBytes)
	assert.Equal(t, len(row), ps.acts[0].rowBytes)
	assert.Equal(t, len(row), ps.acts[1].rowBytes, "the row inside a StageInput's point")
	assert.Equal(t, 0, ps.acts[2].rowBytes)
	assert.Positive(t, ps.historyBytes)

	// A deferred eval: Perf completes at 30, the eval turn arrives at 4030,
	// CheckServer starts at 4050: a 4 s wait for the deployment's eval
	// phase and a 20 ms transition.
	turn := &historypb.HistoryEvent{EventId: 5, EventTime: at(4030), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
			SignalName: workflows.SignalEvalTurn}}}
	ps = analyzePoint([]*historypb.HistoryEvent{
		sched(1, 0, "Perf", `{}`), started(2, 1, 0), completed(3, 1, 30),
		{EventId: 4, EventTime: at(31), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
				SignalName: "other"}}},
		turn, sched(6, 4040, "CheckServer", `{}`), started(7, 6, 4050), completed(8, 6, 4060),
	})
	assert.Equal(t, []float64{20}, ps.transitionsMs)
	assert.Equal(t, []float64{4000}, ps.evalTurnWaitsMs)
}

func TestAnalyzeParentRun(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run1 := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: timestamppb.New(t0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		{EventId: 2, EventType: enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			Attributes: &historypb.HistoryEvent_StartChildWorkflowExecutionInitiatedEventAttributes{StartChildWorkflowExecutionInitiatedEventAttributes: &historypb.StartChildWorkflowExecutionInitiatedEventAttributes{Input: payloadOf("12345")}}},
		{EventId: 3, EventTime: timestamppb.New(t0.Add(time.Second)), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{
				NewExecutionRunId: "run2", Input: payloadOf("1234567890")}}},
	}
	run2 := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: timestamppb.New(t0.Add(time.Second)), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		{EventId: 2, EventTime: timestamppb.New(t0.Add(3 * time.Second)), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{Result: payloadOf("abc")}}},
	}
	var ps parentStats
	assert.Equal(t, "run2", analyzeParentRun(run1, &ps))
	assert.Equal(t, "", analyzeParentRun(run2, &ps))
	assert.Equal(t, []int{3, 2}, ps.events)
	assert.Equal(t, 3*time.Second, ps.end.Sub(ps.start), "from the first run's start to the last run's close")
	assert.Equal(t, 5, ps.childInputMax)
	assert.Equal(t, 10, ps.canInputMax)
	assert.Equal(t, 3, ps.resultBytes)
}

func TestMedianRun(t *testing.T) {
	runs := []OrchestrationRun{
		{PointsPerMin: 100, TransitionP50ms: 30, MaxHistoryEvents: 500, InputBytesMax: 3000, ContinuedAsNew: 1},
		{PointsPerMin: 300, TransitionP50ms: 10, MaxHistoryEvents: 700, InputBytesMax: 3000, ContinuedAsNew: 1},
		{PointsPerMin: 200, TransitionP50ms: 20, MaxHistoryEvents: 600, InputBytesMax: 3000, ContinuedAsNew: 2},
	}
	m := medianRun(runs)
	assert.Equal(t, 200.0, m.PointsPerMin)
	assert.Equal(t, 20.0, m.TransitionP50ms)
	assert.Equal(t, 600, m.MaxHistoryEvents)
	assert.Equal(t, 3000, m.InputBytesMax)
	assert.Equal(t, 1, m.ContinuedAsNew)
}

func TestInputFields(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  map[string]int
	}{
		{"point spec", `{"point_id":"p","row":{"a":1}}`, map[string]int{"point.point_id": len(`point_id`) + 3 + len(`"p"`), "point.row": len(`row`) + 3 + len(`{"a":1}`)}},
		{"stage input", `{"point":{"row":[1,2]},"alloc":{"job_id":"j"}}`, map[string]int{"point.row": len(`row`) + 3 + len(`[1,2]`), "alloc": len(`alloc`) + 3 + len(`{"job_id":"j"}`)}},
		{"not JSON", `xyz`, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, inputFields(payloadOf(tt.input)))
		})
	}
}
