package chaos

import (
	"fmt"
	"slices"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/results"
)

// Reconcile checks a chaos run's faults against the ledger's attempts of
// its sweep: every failed, lost or cancelled attempt must come from one
// fault, and every fault that landed must have made its attempts.
//
//   - A fault a point's attempt carries out, and a node failure, make
//     failed attempts of its point and stage with its class: one (made by
//     the first attempt of the stage that ran), or for a node failure each
//     attempt its retry budget spends on the lost allocation; unless a
//     worker kill or server restart ended that attempt first (it is then
//     lost, and the fault noted as overtaken).
//   - A worker kill or server restart makes a lost attempt (lost-worker) of
//     its point and stage, and of every other attempt it hit; one that
//     finished just as the fault landed is noted, not counted. A lost
//     attempt that ran when it landed (started before Landed, ended after
//     At) but started after the Hit snapshot read its point is its too.
//   - A fault that never landed (Missed) makes none.
//
// It returns the mismatches (none: the ledger holds exactly the run's
// faults) and notes.
func Reconcile(inj []Injection, attempts []results.StageAttempt) (mismatches, notes []string) {
	var failed []results.StageAttempt
	for _, a := range attempts {
		if a.Failed() {
			failed = append(failed, a)
		}
	}
	used := make([]bool, len(failed))
	take := func(match func(results.StageAttempt) bool) bool {
		for i, a := range failed {
			if !used[i] && match(a) {
				used[i] = true
				return true
			}
		}
		return false
	}
	var hits []Attempt
	for _, f := range inj {
		hits = append(hits, f.Hit...)
	}
	// Kills and restarts first: their lost attempts may overtake another
	// fault's attempt.
	for _, f := range inj {
		if f.Missed != "" || (f.Kind != WorkerKill && f.Kind != ServerRestart) {
			continue
		}
		target := Attempt{Point: f.Point, Stage: f.Stage, Attempt: f.Attempt}
		hits := f.Hit
		if !slices.Contains(hits, target) {
			hits = append([]Attempt{target}, hits...)
		}
		for _, h := range hits {
			ok := take(func(a results.StageAttempt) bool {
				return a.PointID == h.Point && a.Stage == h.Stage && a.Attempt == h.Attempt && a.Class == failure.LostWorker
			})
			switch {
			case ok:
			case h == target:
				mismatches = append(mismatches, fmt.Sprintf("%s: no lost attempt %d of %s on %s in the ledger", f.Fault, h.Attempt, h.Stage, h.Point))
			default:
				notes = append(notes, fmt.Sprintf("%s: attempt %d of %s on %s, in flight when it landed, finished anyway", f.Fault, h.Attempt, h.Stage, h.Point))
			}
		}
	}
	for _, f := range inj {
		if f.Missed != "" || (f.Kind != WorkerKill && f.Kind != ServerRestart) || f.Landed.IsZero() {
			continue
		}
		for {
			var lost results.StageAttempt
			if !take(func(a results.StageAttempt) bool {
				lost = a
				return a.Class == failure.LostWorker && !a.StartedAt.After(f.Landed) && (a.EndedAt.IsZero() || !a.EndedAt.Before(f.At))
			}) {
				break
			}
			notes = append(notes, fmt.Sprintf("%s: attempt %d of %s on %s started as it landed and was lost to it", f.Fault, lost.Attempt, lost.Stage, lost.PointID))
		}
	}
	for _, f := range inj {
		if f.Missed != "" || f.Kind == WorkerKill || f.Kind == ServerRestart {
			continue
		}
		match := func(a results.StageAttempt) bool {
			return a.PointID == f.Point && a.Stage == f.Stage && a.Class == f.Expect
		}
		if take(match) {
			for take(match) {
				// the retry budget's further attempts against the same cause
			}
			continue
		}
		// The first attempt of the stage that ran carried the fault: a
		// kill or restart that hit an attempt of it may have ended that
		// attempt before the fault showed.
		if slices.ContainsFunc(hits, func(h Attempt) bool { return h.Point == f.Point && h.Stage == f.Stage }) {
			notes = append(notes, fmt.Sprintf("%s: overtaken by a worker kill or server restart that hit its attempt", f.Fault))
			continue
		}
		mismatches = append(mismatches, fmt.Sprintf("%s: no failed %s attempt of class %s in the ledger", f.Fault, f.Stage, f.Expect))
	}
	for i, a := range failed {
		if !used[i] {
			mismatches = append(mismatches, fmt.Sprintf("ledger: attempt %d of %s on %s failed (%s: %s) and no fault of the run explains it",
				a.Attempt, a.Stage, a.PointID, a.Class, a.Excerpt))
		}
	}
	return mismatches, notes
}
