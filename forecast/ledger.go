package forecast

import (
	"context"
	"slices"
	"time"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// FromLedger reads, for each deployment key (a deployment hash), the
// stage times the ledger holds from earlier runs of that deployment: the
// median of every completed stage of that kind. Keys without runs are
// left out; perf is not read (the row says how long perf runs).
func FromLedger(ctx context.Context, store *results.Store, keys []string) (map[string]Measured, error) {
	out := map[string]Measured{}
	for _, key := range keys {
		runs, err := store.DeploymentStageRuns(ctx, key)
		if err != nil {
			return nil, err
		}
		if m, ok := Measure(runs); ok {
			out[key] = m
		}
	}
	return out, nil
}

// Measure turns one deployment's stage runs (by sweep, point and
// position) into median stage times of the runs that completed.
func Measure(runs []results.StageRun) (Measured, bool) {
	got := map[string][]time.Duration{}
	walk(runs, func(name string, r results.StageRun) {
		if r.Outcome == point.OutcomeOK && name != TimePerf {
			got[name] = append(got[name], r.Duration())
		}
	})
	if len(got) == 0 {
		return Measured{}, false
	}
	m := Measured{Median: map[string]time.Duration{}, Runs: map[string]int{}}
	for name, ds := range got {
		slices.Sort(ds)
		med := ds[len(ds)/2]
		if len(ds)%2 == 0 {
			med = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
		}
		m.Median[name], m.Runs[name] = med, len(ds)
	}
	return m, true
}

// Actual sums what a sweep's stage runs held, as node time by stage kind
// (the kinds of Cluster.NodeHoursByStage), every attempt counted: nodes
// gives each point's node count. The queue wait holds no node.
func Actual(runs []results.StageRun, nodes map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	walk(runs, func(name string, r results.StageRun) {
		if k := kindOf[name]; k != "" {
			out[k] += time.Duration(nodes[r.PointID]) * r.Duration()
		}
	})
	return out
}

// kindOf maps a time name to the stage kind it is accounted to.
var kindOf = map[string]string{TimeCheckpoint: KindBringUp, TimeBringUp: KindBringUp, TimeWarmup: KindWarmup, TimePerf: KindPerf,
	TimeEvalRestart: KindEvalRestart, TimeEval: KindEval, TimeTeardown: KindTeardown}

// walk names the time of every stage run that ran (by sweep, point and
// position; not shared, reused or still running). A bring-up after the
// point's perf run, or on a server another point started, is an eval
// restart.
func walk(runs []results.StageRun, fn func(name string, r results.StageRun)) {
	var sweep, pointID string
	var serverUp bool
	for _, r := range runs {
		if r.SweepID != sweep || r.PointID != pointID {
			sweep, pointID, serverUp = r.SweepID, r.PointID, false
		}
		// A server runs once a point used one: its own bring-up (below),
		// one handed over, or a perf run.
		if (r.Stage == point.StageBringUp && r.Outcome == point.OutcomeShared) || (r.Stage == point.StagePerf && r.Outcome == point.OutcomeOK) {
			serverUp = true
		}
		if r.Outcome == point.OutcomeShared || r.Outcome == point.OutcomeReused || r.Outcome == point.OutcomeRunning || r.EndedAt.IsZero() || r.EndedAt.Before(r.StartedAt) {
			continue
		}
		name := ""
		switch r.Stage {
		case point.StageAllocate:
			name = TimeQueueWait
		case point.StageCheckpoint:
			name = TimeCheckpoint
		case point.StageBringUp:
			name = TimeBringUp
			if serverUp {
				name = TimeEvalRestart
			}
			serverUp = true
		case point.StageWarmup:
			name = TimeWarmup
		case point.StagePerf:
			name = TimePerf
		case point.StageEval:
			name = TimeEval
		case point.StageTeardown:
			name = TimeTeardown
		}
		if name != "" {
			fn(name, r)
		}
	}
}

// BringUps lists the first bring-ups (launch to healthy) of one
// deployment's stage runs that completed, oldest first; eval restarts,
// shared and reused bring-ups are left out.
func BringUps(runs []results.StageRun) []time.Duration {
	var out []time.Duration
	walk(runs, func(name string, r results.StageRun) {
		if name == TimeBringUp && r.Outcome == point.OutcomeOK {
			out = append(out, r.Duration())
		}
	})
	return out
}
