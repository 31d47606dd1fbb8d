// Package accounting books where the node-hours of a sweep's allocations
// went: every node-minute between an allocation's grant and its teardown
// goes to exactly one category (a stage, an operator hold, or a failed
// attempt by failure class), so the categories add up to the allocations.
// It reads only the results ledger (package results).
package accounting

import (
	"cmp"
	"slices"
	"time"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// The categories. A failed attempt is booked to FailedPrefix + its class.
const (
	Staging     = "staging"
	BringUp     = "bring-up"
	Warmup      = "warmup"
	Perf        = "perf"
	EvalRestart = "eval-restart" // a bring-up in eval mode after the point's perf stages
	Eval        = "eval"
	Teardown    = "teardown"
	Held        = "held-for-operator"
	// Adaptive is the warmup and perf of the points an adaptive search
	// added to a deployment (point.Added): what the search cost.
	Adaptive = "adaptive"
	// FailedPrefix + class, e.g. "failed:cuda-oom".
	FailedPrefix = "failed:"
)

// NodeTime is node-nanoseconds: nodes x wall time. Integer, so categories
// add up to the total exactly.
type NodeTime int64

func nodeTime(nodes int, d time.Duration) NodeTime { return NodeTime(int64(nodes) * int64(d)) }

// Minutes is the node time in node-minutes.
func (t NodeTime) Minutes() float64 { return float64(t) / float64(time.Minute) }

// Point is one point of the ledger with what accounting needs.
type Point struct {
	SweepID, PointID string
	Identity         string
	Deployment       string // deployment hash: the points that share one allocation chain in a sweep
	ConfigKey        string
	Cluster          string
	Nodes            int
	// Runs are the point's stage runs in ledger order, failures attached.
	Runs []results.StageRun
	// Attempts are the point's stage attempts as its workers recorded them
	// (results.StageAttempt). A point recorded before the attempt ledger
	// has none; its runs' failures are then all there is.
	Attempts []results.StageAttempt
	// PerfStored, EvalStored: the ledger holds a figure this sweep measured
	// (not a reused one) for the point.
	PerfStored, EvalStored bool
	// ReusedCost is, per reused stage, what the stage cost when it was
	// measured (node time of its run in the source sweep); absent: unknown.
	ReusedCost map[string]NodeTime
	// Added: an adaptive search added the point; its warmup and perf are
	// booked as Adaptive.
	Added bool
}

// Allocation is one allocation: from the grant (the end of the allocate
// stage, or the first stage on nodes handed over) to the end of its
// teardown, or to the last stage recorded on it.
type Allocation struct {
	SweepID, Deployment string
	Nodes               int
	Start, End          time.Time
	// Closed: a teardown ended it (false: the ledger has no teardown yet).
	Closed bool
}

// NodeTime is the allocation's node time.
func (a Allocation) NodeTime() NodeTime { return nodeTime(a.Nodes, a.End.Sub(a.Start)) }

// ClassTotal is one failure class: its failed attempts (also those that held
// no nodes, in allocate and upload) and the node time they lost.
type ClassTotal struct {
	Class    failure.Class
	Attempts int
	NodeTime NodeTime
}

// Saved is one reused stage output: what it cost when it was measured.
type Saved struct {
	SweepID, PointID, Stage string
	NodeTime                NodeTime
	Known                   bool
}

// Sample is one duration of a cluster and deployment.
type Sample struct {
	Cluster, Deployment, ConfigKey string
	D                              time.Duration
}

// Books are the booked node time of a set of points.
type Books struct {
	Categories  map[string]NodeTime
	Total       NodeTime
	Useful      NodeTime // perf and eval node time of runs that ended in a stored figure
	Allocations []Allocation
	Classes     []ClassTotal // ranked by node time lost, then attempts
	Saved       []Saved
	QueueWait   []Sample // allocate stage durations of granted allocations
	BringUpTime []Sample // bring-up runs (not eval restarts) that worked at the first attempt
	// Notes say what could not be booked (a stage on nodes with no
	// allocation recorded before it).
	Notes []string
}

// UsefulFraction is Useful/Total, 0 when nothing was booked.
func (b *Books) UsefulFraction() float64 {
	if b.Total == 0 {
		return 0
	}
	return float64(b.Useful) / float64(b.Total)
}

// AllocationTime is the sum of the allocations' node time; it equals Total.
func (b *Books) AllocationTime() NodeTime {
	var t NodeTime
	for _, a := range b.Allocations {
		t += a.NodeTime()
	}
	return t
}

// Book books the points' node time. now ends the runs still running.
//
// Within one sweep, the points of one deployment run one after another on
// one allocation chain (the sweep's deployment group hands the allocation
// and server from point to point), so their runs are merged into one
// timeline and shared time (the allocation, staging, the bring-up a later
// point marks "shared") is booked once, where it ran. On that timeline an
// allocation opens when an allocate run ends ok and closes when a teardown
// ends; the time between two runs on it goes to the run that follows.
//
// A run with attempts in the ledger is split at them (bookAttempts): a
// failed, lost or cancelled attempt's node time goes to its failure class,
// so only the attempt that produced a stored figure counts as useful.
//
// A run of an older ledger, without attempts, is split by its failures'
// times a1..ak (the last attempt of each retry budget; the ledger does
// not record when the operator decided): [start, a1] is the first failed
// attempt; each later attempt is assumed to last as long as the first
// (at most the gap), and the rest of the gap before it is the hold: the
// operator's, or for a heartbeat timeout (lost-worker) the automatic-retry
// pause, booked to that failure. After ak, a run that ended ok books its
// last attempt (same estimate) to its stage and the rest to the hold; a run
// that was skipped, aborted or released books it all to the hold, up to the
// teardown that released the nodes.
func Book(points []Point, now time.Time) *Books {
	b := &Books{Categories: map[string]NodeTime{}}
	classes := map[failure.Class]*ClassTotal{}
	groups := map[[2]string][]*Point{}
	var keys [][2]string
	for i := range points {
		p := &points[i]
		k := [2]string{p.SweepID, p.Deployment}
		if p.Deployment == "" {
			k[1] = "point:" + p.PointID
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
		count := func(class failure.Class) {
			c := classes[class]
			if c == nil {
				c = &ClassTotal{Class: class}
				classes[class] = c
			}
			c.Attempts++
		}
		for _, a := range p.Attempts {
			if a.Failed() {
				count(attemptClass(a))
			}
		}
		for _, r := range p.Runs {
			for _, f := range r.Failures {
				if len(p.Attempts) == 0 {
					count(f.Class)
				}
			}
			if r.Outcome == point.OutcomeReused {
				cost, ok := p.ReusedCost[r.Stage]
				b.Saved = append(b.Saved, Saved{SweepID: p.SweepID, PointID: p.PointID, Stage: r.Stage, NodeTime: cost, Known: ok})
			}
		}
	}
	slices.SortFunc(keys, func(x, y [2]string) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	for _, k := range keys {
		b.bookGroup(groups[k], now)
	}
	for cat, t := range b.Categories {
		b.Total += t
		if len(cat) > len(FailedPrefix) && cat[:len(FailedPrefix)] == FailedPrefix {
			c := failure.Class(cat[len(FailedPrefix):])
			if classes[c] == nil {
				classes[c] = &ClassTotal{Class: c}
			}
			classes[c].NodeTime = t
		}
	}
	for _, c := range classes {
		b.Classes = append(b.Classes, *c)
	}
	slices.SortFunc(b.Classes, func(x, y ClassTotal) int {
		return cmp.Or(cmp.Compare(y.NodeTime, x.NodeTime), cmp.Compare(y.Attempts, x.Attempts), cmp.Compare(x.Class, y.Class))
	})
	return b
}

// timed is one run on a deployment's timeline.
type timed struct {
	p          *Point
	r          results.StageRun
	end        time.Time
	cat        string    // the category of the run's own time
	releasedAt time.Time // a teardown of the point began inside the run: the nodes went back then
	// atts are the run's attempts, by start (none in older ledgers).
	atts []results.StageAttempt
}

// attemptClass is the class a failed attempt is booked to.
func attemptClass(a results.StageAttempt) failure.Class {
	if a.Class == "" {
		return failure.Transient
	}
	return a.Class
}

// runAttempts gives each of the point's runs its attempts: an attempt
// belongs to the last run of its stage that started before it (allowing a
// second of clock difference between the worker and the workflow).
func runAttempts(p *Point) map[int][]results.StageAttempt {
	out := map[int][]results.StageAttempt{}
	for _, a := range p.Attempts {
		at := -1
		for i, r := range p.Runs {
			if r.Stage == a.Stage && !r.StartedAt.IsZero() && r.Outcome != point.OutcomeReused && r.Outcome != point.OutcomeShared &&
				!r.StartedAt.After(a.StartedAt.Add(time.Second)) {
				at = i
			}
		}
		if at >= 0 {
			out[at] = append(out[at], a)
		}
	}
	for i := range out {
		slices.SortStableFunc(out[i], func(x, y results.StageAttempt) int { return x.StartedAt.Compare(y.StartedAt) })
	}
	return out
}

func (b *Books) bookGroup(ps []*Point, now time.Time) {
	nodes := 0
	var runs []*timed
	for _, p := range ps {
		nodes = max(nodes, p.Nodes)
		atts := runAttempts(p)
		for i, r := range p.Runs {
			if r.StartedAt.IsZero() || r.Outcome == point.OutcomeReused || r.Outcome == point.OutcomeShared {
				continue
			}
			t := &timed{p: p, r: r, end: r.EndedAt, cat: category(p.Runs, i), atts: atts[i]}
			if p.Added && (t.cat == Warmup || t.cat == Perf) {
				t.cat = Adaptive
			}
			if t.end.IsZero() {
				t.end = now
			}
			runs = append(runs, t)
		}
	}
	// A teardown that began while a stage waited for an operator released
	// the nodes (the node hold ran out): the stage held them until then.
	for _, t := range runs {
		for _, u := range runs {
			if u.p == t.p && u.r.Stage == point.StageTeardown && t.r.Stage != point.StageTeardown &&
				u.r.StartedAt.After(t.r.StartedAt) && u.r.StartedAt.Before(t.end) {
				t.releasedAt = u.r.StartedAt
			}
		}
	}
	slices.SortStableFunc(runs, func(x, y *timed) int {
		return cmp.Or(x.r.StartedAt.Compare(y.r.StartedAt), cmp.Compare(x.p.PointID, y.p.PointID), cmp.Compare(x.r.Seq, y.r.Seq))
	})
	var open bool
	var alloc Allocation
	var cursor time.Time
	// book moves the cursor to `to`, booking the time passed to cat.
	book := func(cat string, to time.Time) {
		if open && to.After(cursor) {
			b.Categories[cat] += nodeTime(nodes, to.Sub(cursor))
			cursor = to
		}
	}
	useful := func(t *timed, from NodeTime) {
		if (t.r.Stage == point.StagePerf && t.p.PerfStored) || (t.r.Stage == point.StageEval && t.p.EvalStored) {
			b.Useful += b.Categories[t.cat] - from
		}
	}
	for _, t := range runs {
		p, r := t.p, t.r
		switch r.Stage {
		case point.StageAllocate:
			if r.Outcome != point.OutcomeOK || open {
				continue
			}
			b.QueueWait = append(b.QueueWait, Sample{p.Cluster, p.Deployment, p.ConfigKey, t.end.Sub(r.StartedAt)})
			open, cursor = true, t.end
			alloc = Allocation{SweepID: p.SweepID, Deployment: p.Deployment, Nodes: nodes, Start: t.end}
		case point.StageTeardown:
			book(Teardown, t.end)
			if open {
				alloc.End, alloc.Closed = cursor, true
				b.Allocations = append(b.Allocations, alloc)
				open = false
			}
		case point.StageUpload:
			// Runs after the nodes went back (teardown or hand-over).
		default:
			if !open {
				b.Notes = append(b.Notes, "sweep "+p.SweepID+" point "+p.PointID+": "+r.Stage+" run at "+
					r.StartedAt.UTC().Format(time.RFC3339)+" has no allocation before it in the ledger; not booked")
				continue
			}
			if t.cat == BringUp && r.Outcome == point.OutcomeOK && len(r.Failures) == 0 &&
				!slices.ContainsFunc(t.atts, results.StageAttempt.Failed) {
				b.BringUpTime = append(b.BringUpTime, Sample{p.Cluster, p.Deployment, p.ConfigKey, t.end.Sub(r.StartedAt)})
			}
			before := b.Categories[t.cat]
			b.bookRun(t, book)
			useful(t, before)
		}
	}
	if open {
		alloc.End = cursor
		b.Allocations = append(b.Allocations, alloc)
	}
}

// bookRun books one run on nodes from the cursor (see Book).
func (b *Books) bookRun(t *timed, book func(string, time.Time)) {
	r := t.r
	end := t.end
	if !t.releasedAt.IsZero() {
		end = t.releasedAt
	}
	clip := func(x time.Time) time.Time {
		if x.Before(r.StartedAt) {
			return r.StartedAt
		}
		if x.After(end) {
			return end
		}
		return x
	}
	if len(t.atts) > 0 {
		t.bookAttempts(end, clip, book)
		return
	}
	fs := slices.Clone(r.Failures)
	slices.SortStableFunc(fs, func(x, y failure.Attempt) int { return x.At.Compare(y.At) })
	if len(fs) == 0 {
		book(t.cat, end)
		return
	}
	failed := func(i int) string { return FailedPrefix + string(fs[i].Class) }
	// wait is the category of the time between failure i and the next attempt.
	wait := func(i int) string {
		if fs[i].Class == failure.LostWorker {
			return failed(i)
		}
		return Held
	}
	first := clip(fs[0].At).Sub(r.StartedAt)
	book(failed(0), clip(fs[0].At))
	for i := 1; i < len(fs); i++ {
		a := clip(fs[i].At)
		book(wait(i-1), a.Add(-min(first, a.Sub(clip(fs[i-1].At)))))
		book(failed(i), a)
	}
	last := len(fs) - 1
	switch {
	case r.Outcome == point.OutcomeOK:
		book(wait(last), end.Add(-min(first, end.Sub(clip(fs[last].At)))))
		book(t.cat, end)
	case r.Outcome == point.OutcomeAllocationLost:
		book(failed(last), end)
	default:
		book(Held, end)
	}
}

// bookAttempts books a run from the attempts its workers recorded, up to
// end (the run's end, or the release of its nodes). A failed, lost or
// cancelled attempt's time is its class's, from its start to its end; an
// attempt that succeeded, or still runs, is the stage's. Between two
// attempts of one retry budget (the next one's attempt number is above 1)
// the retry policy's backoff is lost to the failure before it; before an
// attempt that starts a new budget the point waited for an operator (held),
// unless a heartbeat timeout ended the last budget: then it paused for its
// automatic retry, lost to lost-worker. Time before the first attempt (a
// hand-over, scheduling) is the first attempt's; after the last one, the
// stage's when it succeeded, the failure's when it lost the allocation, and
// otherwise the wait for an operator.
func (t *timed) bookAttempts(end time.Time, clip func(time.Time) time.Time, book func(string, time.Time)) {
	cat := func(a results.StageAttempt) string {
		if a.Failed() {
			return FailedPrefix + string(attemptClass(a))
		}
		return t.cat
	}
	for i, a := range t.atts {
		start := clip(a.StartedAt)
		switch {
		case i == 0:
			book(cat(a), start)
		case !t.atts[i-1].Failed():
			book(t.cat, start)
		case a.Attempt > 1 || attemptClass(t.atts[i-1]) == failure.LostWorker:
			book(cat(t.atts[i-1]), start)
		default:
			book(Held, start)
		}
		stop := a.EndedAt
		if stop.IsZero() {
			stop = end // still running, or never closed
		}
		book(cat(a), clip(stop))
	}
	last := t.atts[len(t.atts)-1]
	switch {
	case !last.Failed() || t.r.Outcome == point.OutcomeOK:
		book(t.cat, end)
	case t.r.Outcome == point.OutcomeAllocationLost:
		book(cat(last), end)
	default:
		book(Held, end)
	}
}

// category is the category of run i's own time: its stage's, with a
// bring-up in eval mode (the next stage on the nodes is eval) after a warmup
// or perf run of the point booked as the eval restart. An eval-only point's
// bring-up is its bring-up.
func category(runs []results.StageRun, i int) string {
	switch runs[i].Stage {
	case point.StageCheckpoint:
		return Staging
	case point.StageWarmup:
		return Warmup
	case point.StagePerf:
		return Perf
	case point.StageEval:
		return Eval
	case point.StageTeardown:
		return Teardown
	case point.StageBringUp:
		if !slices.ContainsFunc(runs[:i], func(r results.StageRun) bool {
			return r.Stage == point.StageWarmup || r.Stage == point.StagePerf
		}) {
			return BringUp
		}
		for _, r := range runs[i+1:] {
			switch r.Stage {
			case point.StageEval:
				return EvalRestart
			case point.StageWarmup, point.StagePerf:
				return BringUp
			}
		}
		return BringUp
	}
	return runs[i].Stage
}
