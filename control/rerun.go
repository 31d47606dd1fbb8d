package control

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/workflows"
)

// Rerun says how a new run of an earlier sweep differs from it.
type Rerun struct {
	// SweepFile and ClusterFile, when set, plan again from files (onto
	// another cluster, or after editing a recipe) instead of reusing the
	// stored plan; each replaces the old sweep's file of its kind.
	SweepFile, ClusterFile string
	ID                     string   // the new sweep's ID ("" for <old>-rerun<N>)
	ReuseFrom, Force       []string // besides the old sweep, which is always reused
	Faults                 []string // POINT:STAGE[:TIMES]
	Tuning                 workflows.Tuning
	// Ledger names the ledger in the error for a sweep it does not know.
	Ledger string
}

// RerunInput builds the start input of a new run of sweep old, and the
// files its plan read. The plan comes from the ledger, so a rerun works
// once Temporal has dropped the old sweep's history; a sweep started before
// plans were kept is asked of Temporal and planned again from its files.
// Planning errors keep their first line, as the CLI prints them.
func RerunInput(ctx context.Context, c client.Client, store *results.Store, old string, r Rerun) (*workflows.SweepInput, []results.PlanFile, error) {
	prev, stored, found, err := StoredPlan(ctx, store, old)
	if err != nil {
		return nil, nil, err
	}
	replan := r.SweepFile != "" || r.ClusterFile != ""
	if !found && !replan {
		pr, qerr := Query(ctx, c, old)
		if qerr != nil {
			return nil, nil, fmt.Errorf("sweep %s: no plan in the ledger (%s) and Temporal does not know it either: %v; pass --sweep and --cluster to plan again",
				old, r.Ledger, qerr)
		}
		prev = &workflows.SweepInput{SweepFile: pr.SweepFile, ClusterFile: pr.ClusterFile, ReuseFrom: pr.ReuseFrom}
		replan = true
	}
	reuse := append([]string{old}, prev.ReuseFrom...)
	reuse = append(reuse, r.ReuseFrom...)
	var in *workflows.SweepInput
	var files []results.PlanFile
	if replan {
		// A rerun of a canary sweep runs canaries again.
		req := Request{SweepFile: cmp.Or(r.SweepFile, prev.SweepFile), ClusterFile: cmp.Or(r.ClusterFile, prev.ClusterFile),
			ID: r.ID, ReuseFrom: reuse, Force: r.Force, Faults: r.Faults, Tuning: r.Tuning, Canary: len(prev.Canaries) > 0}
		if len(prev.Points) > 0 {
			req.RecipeSets = prev.Points[0].RecipeSets // the earlier run's --set overrides
		}
		var p *plan.Plan
		if in, p, err = Build(req); err != nil {
			return nil, nil, errtext.FirstLineError(err)
		}
		if files, err = PlanFiles(p); err != nil {
			return nil, nil, err
		}
	} else {
		in, files = prev, stored
		in.ReuseFrom, in.Force, in.Done, in.Runs, in.StartedAt = reuse, r.Force, nil, 0, time.Time{}
		in.Tuning = r.Tuning
		for i := range in.Points {
			in.Points[i].Faults = nil
		}
		if err := ApplyFaults(r.Faults, in.Points); err != nil {
			return nil, nil, errtext.FirstLineError(err)
		}
		if len(in.Canaries) > 0 {
			// The stored points keep their node-minutes; verdicts start over.
			in.Canaries = point.PickCanaries(in.Points, in.NodeBudget)
		}
		in.SweepID = r.ID
	}
	if r.ID == "" {
		if in.SweepID, err = NextRerunID(ctx, c, old); err != nil {
			return nil, nil, err
		}
	}
	return in, files, nil
}
