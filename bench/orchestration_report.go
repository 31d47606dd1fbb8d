package bench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/loadgen"
)

func maxInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// medianRun is the per-figure median of the runs (the first run's IDs and
// per-activity maxima, which do not vary).
func medianRun(rs []OrchestrationRun) OrchestrationRun {
	m := rs[0]
	m.SweepID = ""
	mf := func(get func(OrchestrationRun) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		return loadgen.PercentileOf(xs, 50, loadgen.Linear)
	}
	mi := func(get func(OrchestrationRun) int) int {
		return int(mf(func(r OrchestrationRun) float64 { return float64(get(r)) }))
	}
	m.WallS = mf(func(r OrchestrationRun) float64 { return r.WallS })
	m.PointsPerMin = mf(func(r OrchestrationRun) float64 { return r.PointsPerMin })
	m.ActivitiesPerMin = mf(func(r OrchestrationRun) float64 { return r.ActivitiesPerMin })
	m.TransitionP50ms = mf(func(r OrchestrationRun) float64 { return r.TransitionP50ms })
	m.TransitionP99ms = mf(func(r OrchestrationRun) float64 { return r.TransitionP99ms })
	m.PointEventsMax = mi(func(r OrchestrationRun) int { return r.PointEventsMax })
	m.PointEventsP50 = mi(func(r OrchestrationRun) int { return r.PointEventsP50 })
	m.PointHistoryBytesMax = mi(func(r OrchestrationRun) int { return r.PointHistoryBytesMax })
	m.PointUpsertsMax = mi(func(r OrchestrationRun) int { return r.PointUpsertsMax })
	m.ParentEventsMax = mi(func(r OrchestrationRun) int { return r.ParentEventsMax })
	m.DeploymentEventsMax = mi(func(r OrchestrationRun) int { return r.DeploymentEventsMax })
	m.MaxHistoryEvents = mi(func(r OrchestrationRun) int { return r.MaxHistoryEvents })
	m.ContinuedAsNew = mi(func(r OrchestrationRun) int { return r.ContinuedAsNew })
	m.InputBytesMax = mi(func(r OrchestrationRun) int { return r.InputBytesMax })
	m.InputBytesP50 = mi(func(r OrchestrationRun) int { return r.InputBytesP50 })
	m.RowBytesP50 = mi(func(r OrchestrationRun) int { return r.RowBytesP50 })
	m.ChildInputBytesMax = mi(func(r OrchestrationRun) int { return r.ChildInputBytesMax })
	m.CANInputBytesMax = mi(func(r OrchestrationRun) int { return r.CANInputBytesMax })
	m.ResultBytes = mi(func(r OrchestrationRun) int { return r.ResultBytes })
	m.LoadAvg[0] = mf(func(r OrchestrationRun) float64 { return r.LoadAvg[0] })
	m.LoadAvg[1] = mf(func(r OrchestrationRun) float64 { return r.LoadAvg[1] })
	return m
}

func printOrchReport(w io.Writer, rep OrchestrationReport) {
	eager := "eager activities (one task queue)"
	if !rep.Eager {
		eager = "two task queues (control + cluster), no eager activities"
	}
	fmt.Fprintf(w, "orchestration: %d points x %d runs, %d in flight, %d pollers, %s\nserver: %s; %d CPUs\n\n",
		rep.Points, len(rep.Runs), rep.Parallel, rep.Pollers, eager, rep.Server, rep.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "figure\t"
	for i := range rep.Runs {
		head += fmt.Sprintf("run %d\t", i+1)
	}
	fmt.Fprintln(tw, head+"median\tgoal\t")
	row := func(name string, get func(OrchestrationRun) string, goal string) {
		line := name + "\t"
		for _, r := range rep.Runs {
			line += get(r) + "\t"
		}
		fmt.Fprintln(tw, line+get(rep.Median)+"\t"+goal+"\t")
	}
	ok := func(b bool) string {
		if b {
			return " (met)"
		}
		return " (NOT met)"
	}
	f1 := func(g func(OrchestrationRun) float64) func(OrchestrationRun) string {
		return func(r OrchestrationRun) string { return fmt.Sprintf("%.1f", g(r)) }
	}
	d := func(g func(OrchestrationRun) int) func(OrchestrationRun) string {
		return func(r OrchestrationRun) string { return fmt.Sprintf("%d", g(r)) }
	}
	row("points/min", f1(func(r OrchestrationRun) float64 { return r.PointsPerMin }), fmt.Sprintf(">= %d%s", orchGoalPointsPerMin, ok(rep.Goals.PointsPerMin)))
	row("activities/min", f1(func(r OrchestrationRun) float64 { return r.ActivitiesPerMin }), "")
	row("activities per point", f1(func(r OrchestrationRun) float64 { return float64(r.Activities) / float64(max(r.Points, 1)) }), "")
	row("wall s", f1(func(r OrchestrationRun) float64 { return r.WallS }), "")
	row("transition p50 ms", f1(func(r OrchestrationRun) float64 { return r.TransitionP50ms }), fmt.Sprintf("<= %d%s", orchGoalTransitionP50, ok(rep.Goals.TransitionP50)))
	row("transition p99 ms", f1(func(r OrchestrationRun) float64 { return r.TransitionP99ms }), "")
	if rep.PerDeployment > 1 {
		row("eval-turn waits (excluded)", d(func(r OrchestrationRun) int { return r.EvalTurnWaits }), "")
		row("eval-turn wait p50 ms", f1(func(r OrchestrationRun) float64 { return r.EvalTurnWaitP50ms }), "")
		row("eval-turn wait max ms", f1(func(r OrchestrationRun) float64 { return r.EvalTurnWaitMaxms }), "")
	}
	row("point history events max", d(func(r OrchestrationRun) int { return r.PointEventsMax }), "")
	row("point history events p50", d(func(r OrchestrationRun) int { return r.PointEventsP50 }), "")
	row("point history bytes max", d(func(r OrchestrationRun) int { return r.PointHistoryBytesMax }), "")
	row("point attribute upserts max", d(func(r OrchestrationRun) int { return r.PointUpsertsMax }), "")
	row("sweep parent events (max run)", d(func(r OrchestrationRun) int { return r.ParentEventsMax }), fmt.Sprintf("<= %d%s", orchGoalHistoryEvents, ok(rep.Goals.HistoryEvents)))
	if rep.Median.DeploymentEventsMax > 0 {
		row("deployment workflow events max", d(func(r OrchestrationRun) int { return r.DeploymentEventsMax }), "")
	}
	row("parent continued as new", d(func(r OrchestrationRun) int { return r.ContinuedAsNew }), "")
	row("activity input bytes max", d(func(r OrchestrationRun) int { return r.InputBytesMax }), fmt.Sprintf("< %d%s", orchGoalInputBytes, ok(rep.Goals.ActivityInputs4K)))
	row("activity input bytes p50", d(func(r OrchestrationRun) int { return r.InputBytesP50 }), "")
	row("  of which row JSON p50", d(func(r OrchestrationRun) int { return r.RowBytesP50 }), "")
	row("point workflow input bytes max", d(func(r OrchestrationRun) int { return r.ChildInputBytesMax }), "")
	row("sweep start input bytes", d(func(r OrchestrationRun) int { return r.StartInputBytes }), "")
	row("continue-as-new input bytes max", d(func(r OrchestrationRun) int { return r.CANInputBytesMax }), "")
	row("sweep result bytes", d(func(r OrchestrationRun) int { return r.ResultBytes }), "")
	row("load avg 1m start", f1(func(r OrchestrationRun) float64 { return r.LoadAvg[0] }), "")
	row("load avg 1m end", f1(func(r OrchestrationRun) float64 { return r.LoadAvg[1] }), "")
	tw.Flush()
	names := make([]string, 0, len(rep.Median.InputBytesByType))
	for n := range rep.Median.InputBytesByType {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, rep.Median.InputBytesByType[n]))
	}
	fmt.Fprintf(w, "\nmax input bytes by activity (run 1): %s\n", strings.Join(parts, ", "))
	fields := make([]string, 0, len(rep.Median.LargestInput))
	for k := range rep.Median.LargestInput {
		fields = append(fields, k)
	}
	sort.Slice(fields, func(i, j int) bool {
		a, b := rep.Median.LargestInput[fields[i]], rep.Median.LargestInput[fields[j]]
		return a > b || a == b && fields[i] < fields[j]
	})
	parts = parts[:0]
	for _, k := range fields[:min(len(fields), 8)] {
		parts = append(parts, fmt.Sprintf("%s %d", k, rep.Median.LargestInput[k]))
	}
	fmt.Fprintf(w, "largest input (%s) by JSON field: %s\n", rep.Median.LargestInputType, strings.Join(parts, ", "))
}
