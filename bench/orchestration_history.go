package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/workflows"
)

// whyClosed reads the last failed workflow task and the termination reason
// of a sweep's latest run: a result or continue-as-new input over the
// server's blob size limit shows up there, not in the client's error.
func whyClosed(ctx context.Context, c client.Client, wid string) string {
	evs, err := orchHistory(ctx, c, wid, "")
	if err != nil {
		return ""
	}
	var parts []string
	for i := len(evs) - 1; i >= 0 && len(parts) < 2; i-- {
		e := evs[i]
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			parts = append(parts, "terminated: "+e.GetWorkflowExecutionTerminatedEventAttributes().GetReason())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			a := e.GetWorkflowTaskFailedEventAttributes()
			parts = append(parts, fmt.Sprintf("last workflow task failed (%s): %s", a.GetCause(), a.GetFailure().GetMessage()))
			i = 0
		}
	}
	return strings.Join(parts, "; ")
}

// parentStats are the sweep workflow's runs (one per continue-as-new).
type parentStats struct {
	events        []int
	start, end    time.Time
	childInputMax int
	canInputMax   int
	// startInputBytes is the first run's input.
	startInputBytes int
	resultBytes     int
}

func sweepRunsStats(ctx context.Context, c client.Client, wid, runID string) (parentStats, error) {
	var ps parentStats
	for runID != "" {
		evs, err := orchHistory(ctx, c, wid, runID)
		if err != nil {
			return ps, err
		}
		next := analyzeParentRun(evs, &ps)
		runID = next
	}
	return ps, nil
}

// analyzeParentRun adds one run of the sweep workflow to ps and returns the
// next run's ID after a continue-as-new.
func analyzeParentRun(evs []*historypb.HistoryEvent, ps *parentStats) string {
	ps.events = append(ps.events, len(evs))
	next := ""
	for _, e := range evs {
		t := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if ps.start.IsZero() {
				ps.start = t
				ps.startInputBytes = orchPayloadsBytes(e.GetWorkflowExecutionStartedEventAttributes().GetInput())
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			ps.childInputMax = max(ps.childInputMax, orchPayloadsBytes(e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetInput()))
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			a := e.GetWorkflowExecutionContinuedAsNewEventAttributes()
			ps.canInputMax = max(ps.canInputMax, orchPayloadsBytes(a.GetInput()))
			next = a.GetNewExecutionRunId()
			ps.end = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			ps.resultBytes = orchPayloadsBytes(e.GetWorkflowExecutionCompletedEventAttributes().GetResult())
			ps.end = t
		}
	}
	return next
}

// pointStats is one point workflow's history.
type pointStats struct {
	events        int
	historyBytes  int
	upserts       int
	acts          []actStats
	transitionsMs []float64
	// evalTurnWaitsMs: activity gaps spanning the wait for the deployment's
	// eval phase (SignalEvalTurn), which is scheduling by design.
	evalTurnWaitsMs []float64
}

type actStats struct {
	name       string
	input      *commonpb.Payloads
	inputBytes int
	rowBytes   int
	scheduled  int64
	started    time.Time
	completed  time.Time
}

func pointsStats(ctx context.Context, c client.Client, ids []string) ([]pointStats, error) {
	out := make([]pointStats, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				evs, err := orchHistory(ctx, c, ids[i], "")
				if err != nil {
					errs[i] = err
					continue
				}
				out[i] = analyzePoint(evs)
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// analyzePoint reads a point's activities from its history: input sizes and
// the transitions from one activity's completion to the next one's start.
func analyzePoint(evs []*historypb.HistoryEvent) pointStats {
	ps := pointStats{events: len(evs)}
	byID := map[int64]*actStats{}
	var order []*actStats
	var turns []time.Time
	for _, e := range evs {
		ps.historyBytes += orchProtoSize(e)
		t := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			ps.upserts++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := e.GetActivityTaskScheduledEventAttributes()
			st := &actStats{name: a.GetActivityType().GetName(), input: a.GetInput(), inputBytes: orchPayloadsBytes(a.GetInput()),
				rowBytes: orchRowBytes(a.GetInput()), scheduled: e.GetEventId()}
			byID[e.GetEventId()] = st
			order = append(order, st)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if st := byID[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; st != nil {
				st.started = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if st := byID[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; st != nil {
				st.completed = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalEvalTurn {
				turns = append(turns, t)
			}
		}
	}
	for i, a := range order {
		ps.acts = append(ps.acts, *a)
		if i == 0 {
			continue
		}
		prev := order[i-1]
		if prev.completed.IsZero() || a.started.IsZero() || a.started.Before(prev.completed) {
			continue
		}
		from := prev.completed
		for _, turn := range turns {
			if !turn.Before(prev.completed) && !turn.After(a.started) {
				// The point waited for its deployment's eval phase: only
				// the time from its turn to its next activity is a transition.
				ps.evalTurnWaitsMs = append(ps.evalTurnWaitsMs, float64(turn.Sub(prev.completed).Microseconds())/1000)
				from = turn
			}
		}
		ps.transitionsMs = append(ps.transitionsMs, float64(a.started.Sub(from).Microseconds())/1000)
	}
	return ps
}

func orchHistory(ctx context.Context, c client.Client, wid, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var evs []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", wid, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

func orchProtoSize(e *historypb.HistoryEvent) int {
	b, err := e.Marshal()
	if err != nil {
		return 0
	}
	return len(b)
}

// payloadsBytes is the data bytes of the payloads (metadata excluded).
func orchPayloadsBytes(p *commonpb.Payloads) int {
	n := 0
	for _, x := range p.GetPayloads() {
		n += len(x.GetData())
	}
	return n
}

// rowBytes finds the matrix row JSON in an activity input: the "row" of a
// PointSpec argument or of its "point" field.
func orchRowBytes(p *commonpb.Payloads) int {
	n := 0
	for _, x := range p.GetPayloads() {
		var top map[string]json.RawMessage
		if json.Unmarshal(x.GetData(), &top) != nil {
			continue
		}
		if r, ok := top["row"]; ok {
			n += len(r)
			continue
		}
		var pt map[string]json.RawMessage
		if json.Unmarshal(top["point"], &pt) == nil {
			n += len(pt["row"])
		}
	}
	return n
}

// inputFields splits a JSON activity input into the bytes of its fields;
// the fields of a PointSpec (the input itself, or its "point") are named
// "point.<field>".
func inputFields(p *commonpb.Payloads) map[string]int {
	out := map[string]int{}
	for _, x := range p.GetPayloads() {
		var top map[string]json.RawMessage
		if json.Unmarshal(x.GetData(), &top) != nil {
			continue
		}
		if _, ok := top["point_id"]; ok { // the PointSpec itself
			top = map[string]json.RawMessage{"point": x.GetData()}
		}
		for k, v := range top {
			var pt map[string]json.RawMessage
			if k == "point" && json.Unmarshal(v, &pt) == nil {
				for pk, pv := range pt {
					out["point."+pk] += len(pk) + 3 + len(pv)
				}
				continue
			}
			out[k] += len(k) + 3 + len(v)
		}
	}
	return out
}
