package e2e

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// historyNodeMinutes is the node-minutes of a sweep's allocations read from
// Temporal history, not from the ledger: for each point workflow, the span
// from each Allocate activity's completion to the next Teardown activity's
// end, times the point's nodes. (Points of one deployment group would hand
// allocations over; this is for sweeps whose points run alone.)
func (e *itEnv) historyNodeMinutes(store *results.Store, sweepID string) float64 {
	ps, err := store.Points(context.Background(), sweepID)
	require.NoError(e.t, err)
	total := 0.0
	for _, p := range ps {
		var spec point.Spec
		require.NoError(e.t, json.Unmarshal(p.SpecJSON, &spec), p.PointID)
		it := e.c.GetWorkflowHistory(context.Background(), workflows.PointWorkflowID(sweepID, p.PointID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		types := map[int64]string{}
		var granted time.Time
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(e.t, err)
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				types[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			var sched int64
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				sched = a.GetScheduledEventId()
			} else if a := ev.GetActivityTaskFailedEventAttributes(); a != nil && types[a.GetScheduledEventId()] == "Teardown" {
				sched = a.GetScheduledEventId()
			}
			switch at := ev.GetEventTime().AsTime(); types[sched] {
			case "Allocate":
				granted = at
			case "Teardown":
				if !granted.IsZero() {
					total += float64(spec.Nodes) * at.Sub(granted).Minutes()
					granted = time.Time{}
				}
			}
		}
		require.True(e.t, granted.IsZero(), "point %s: an allocation with no teardown in its history", p.PointID)
	}
	return total
}

// requireNodeHoursAddUp checks `starter stats --sweep` on a finished sweep:
// its categories add up to its total, and the total is the allocations'
// node-minutes from Temporal history, to the minute.
func (e *itEnv) requireNodeHoursAddUp(sweepID string) map[string]float64 {
	out, code := e.cli("stats", "--sweep", sweepID, "--json")
	require.Equal(e.t, 0, code, out)
	var got struct {
		Total      float64            `json:"total_node_minutes"`
		Categories map[string]float64 `json:"categories"`
		Order      []string           `json:"category_order"`
	}
	require.NoError(e.t, json.Unmarshal([]byte(out), &got), out)
	sum := 0.0
	for _, c := range got.Order {
		sum += got.Categories[c]
	}
	require.Equal(e.t, got.Total, sum, out)
	want := e.historyNodeMinutes(e.ledger(), sweepID)
	require.Greater(e.t, want, 0.0)
	require.Less(e.t, math.Abs(got.Total-want), 1.0, "stats books %.3f node-minutes, history's allocations hold %.3f\n%s", got.Total, want, out)
	e.t.Logf("sweep %s: %.3f node-minutes booked, %.3f in history's allocations", sweepID, got.Total, want)
	return got.Categories
}
