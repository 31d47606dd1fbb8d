package e2e

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// historyNodeMinutes is the node-minutes of a sweep's allocations read from
// Temporal history, not from the ledger: the points of one deployment use
// one allocation at a time (handed from point to point in a deployment
// group), so each Allocate activity's completion in any of its point
// workflows opens one and the next Teardown activity's end closes it;
// times the deployment's nodes.
func (e *itEnv) historyNodeMinutes(store *results.Store, sweepID string) float64 {
	ps, err := store.Points(context.Background(), sweepID)
	require.NoError(e.t, err)
	type event struct {
		at       time.Time
		teardown bool
	}
	events := map[string][]event{}
	nodes := map[string]int{}
	for _, p := range ps {
		var spec point.Spec
		require.NoError(e.t, json.Unmarshal(p.SpecJSON, &spec), p.PointID)
		dep := spec.DeploymentHash
		nodes[dep] = spec.Nodes
		it := e.c.GetWorkflowHistory(context.Background(), workflows.PointWorkflowID(sweepID, p.PointID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		types := map[int64]string{}
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
			switch types[sched] {
			case "Allocate":
				events[dep] = append(events[dep], event{at: ev.GetEventTime().AsTime()})
			case "Teardown":
				events[dep] = append(events[dep], event{at: ev.GetEventTime().AsTime(), teardown: true})
			}
		}
	}
	total := 0.0
	for dep, evs := range events {
		sort.Slice(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		var granted time.Time
		for _, ev := range evs {
			switch {
			case !ev.teardown:
				require.True(e.t, granted.IsZero(), "deployment %s: two allocations at once", dep)
				granted = ev.at
			case !granted.IsZero():
				total += float64(nodes[dep]) * ev.at.Sub(granted).Minutes()
				granted = time.Time{}
			}
		}
		require.True(e.t, granted.IsZero(), "deployment %s: an allocation with no teardown in history", dep)
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
