package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"go.temporal.io/sdk/temporal"
)

// PlanPageRequest asks for points of a sweep plan stored in the ledger
// (`starter sweep start` stores it before the workflow starts): the points
// [Offset, Offset+Limit) in plan order. It is a few dozen bytes, so a sweep
// of any size loads its plan with bounded activity inputs.
type PlanPageRequest struct {
	SweepID string `json:"sweep_id"` // whose stored plan
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
}

// PlanPage is one page of a stored plan's points.
type PlanPage struct {
	Points []point.Spec `json:"points"`
	// Total is the number of points in the whole plan.
	Total int `json:"total"`
}

// ErrNoPlan: the ledger holds no plan under the sweep ID (or the worker has
// no ledger); retrying cannot help.
const ErrNoPlan = "NoStoredPlan"

// plans caches parsed plans: a 10,000-point plan is ~20 MB of JSON and is
// read page by page. Plans are immutable once stored (the ledger refuses a
// different plan under the same sweep ID), so the cache never goes stale.
var plans = struct {
	sync.Mutex
	order []string
	byKey map[string][]point.Spec
}{byKey: map[string][]point.Spec{}}

const plansCached = 4

// LoadPlanPage returns a page of the points of a sweep plan stored in the
// ledger. Idempotent: it only reads.
func (a *Activities) LoadPlanPage(ctx context.Context, req PlanPageRequest) (PlanPage, error) {
	if a.Store == nil {
		return PlanPage{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sweep %s: the plan is stored in the ledger, but this worker has no ledger (start it with the same --results/SWEEPFLOW_RESULTS as starter)", req.SweepID),
			ErrNoPlan, nil)
	}
	if req.Offset < 0 || req.Limit <= 0 {
		return PlanPage{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sweep %s: bad plan page offset %d limit %d", req.SweepID, req.Offset, req.Limit), string(failure.ErrBadConfig), nil)
	}
	key := fmt.Sprintf("%p/%s", a.Store, req.SweepID)
	plans.Lock()
	pts, ok := plans.byKey[key]
	plans.Unlock()
	if !ok {
		sp, found, err := a.Store.GetSweepPlan(ctx, req.SweepID)
		if err != nil {
			return PlanPage{}, err // the ledger may come back: retry
		}
		if !found {
			return PlanPage{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("sweep %s: the ledger holds no stored plan for it", req.SweepID), ErrNoPlan, nil)
		}
		var plan struct {
			Points []point.Spec `json:"points"`
		}
		if err := json.Unmarshal(sp.PlanJSON, &plan); err != nil {
			return PlanPage{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("sweep %s: stored plan: %v", req.SweepID, err), string(failure.ErrBadConfig), err)
		}
		if len(plan.Points) == 0 {
			return PlanPage{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("sweep %s: stored plan has no points", req.SweepID), ErrNoPlan, errors.New("empty plan"))
		}
		pts = plan.Points
		plans.Lock()
		if _, ok := plans.byKey[key]; !ok {
			plans.byKey[key] = pts
			plans.order = append(plans.order, key)
			if len(plans.order) > plansCached {
				delete(plans.byKey, plans.order[0])
				plans.order = plans.order[1:]
			}
		}
		plans.Unlock()
	}
	lo := min(req.Offset, len(pts))
	hi := min(lo+req.Limit, len(pts))
	return PlanPage{Points: append([]point.Spec(nil), pts[lo:hi]...), Total: len(pts)}, nil
}
