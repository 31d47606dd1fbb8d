package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// planPageSize is how many points one LoadPlanPage returns (~2.2 KB each:
// ~450 KB per page) and how many the sweep keeps queued ahead.
const planPageSize = 200

// morePlan: the stored plan has points this run has not loaded.
func (s *sweepRun) morePlan() bool {
	return s.in.PlanRef != "" && (s.in.PlanTotal == 0 || s.cursor < s.in.PlanTotal)
}

// loadMore loads pages of the stored plan while fewer than a page of
// points wait in the queue.
func (s *sweepRun) loadMore(ctx workflow.Context) error {
	// A canary sweep whose queued points all wait for a canary on a later
	// page loads on until it finds it.
	for s.morePlan() && (queuedPoints(s.queue) < planPageSize || s.starved()) {
		lctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, s.in.TaskQueue, s.in.Tuning))
		req := activities.PlanPageRequest{SweepID: s.in.PlanRef, Offset: s.cursor, Limit: planPageSize}
		var page activities.PlanPage
		if err := workflow.ExecuteActivity(lctx, s.acts.LoadPlanPage, req).Get(lctx, &page); err != nil {
			return fmt.Errorf("sweep %s: loading its stored plan at point %d: %w", s.in.SweepID, s.cursor, err)
		}
		if page.Total <= 0 || (len(page.Points) == 0 && s.cursor < page.Total) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("sweep %s: stored plan %s: empty page at point %d of %d",
				s.in.SweepID, s.in.PlanRef, s.cursor, page.Total), string(failure.ErrBadConfig), nil)
		}
		s.in.PlanTotal = page.Total
		fresh := make([]point.Spec, 0, len(page.Points))
		for i, p := range page.Points {
			if s.finished[p.PointID] {
				continue // finished in an earlier run
			}
			p.SweepID = s.in.SweepID
			s.index[p.PointID] = s.cursor + i
			fresh = append(fresh, p)
		}
		s.cursor += len(page.Points)
		s.points = append(s.points, fresh...)
		s.planned = nil
		s.enqueue(fresh)
		s.failUnfit()
		s.settle()
	}
	return nil
}

// enqueue adds loaded points to the queue: to their deployment's queuedDeployment when
// it still waits, alone when their deployment already started in this run
// (a deployment split across pages must not start a second group workflow
// under the same ID), else as a new queued deployment. Largest first, as at the start.
func (s *sweepRun) enqueue(pts []point.Spec) {
	for _, u := range queuedDeployments(pts, s.canary.solo) {
		if i := slices.IndexFunc(s.queue, func(q queuedDeployment) bool { return q.key == u.key }); i >= 0 {
			s.queue[i].points = append(s.queue[i].points, u.points...)
			s.queue[i].nodes = max(s.queue[i].nodes, u.nodes)
			continue
		}
		if s.startedKey[u.key] {
			for _, p := range u.points {
				s.queue = append(s.queue, queuedDeployment{key: "point:" + p.PointID, points: []point.Spec{p}, nodes: p.Nodes})
			}
			continue
		}
		s.queue = append(s.queue, u)
	}
	s.sortQueue()
}

func queuedPoints(q []queuedDeployment) int {
	n := 0
	for _, u := range q {
		n += len(u.points)
	}
	return n
}

// resumeOffset is where the next run starts loading the stored plan: the
// first queued point (points before it have all finished).
func (s *sweepRun) resumeOffset() int {
	off := s.cursor
	for _, u := range s.queue {
		for _, p := range u.points {
			if i, ok := s.index[p.PointID]; ok {
				off = min(off, i)
			}
		}
	}
	return off
}

// failUnfit fails the queued points that can never fit at once instead of
// letting them block the queue.
func (s *sweepRun) failUnfit() {
	for _, u := range slices.Clone(s.queue) {
		if u.nodes > s.in.NodeBudget || u.nodes <= 0 {
			s.removeQueued(u.key)
			s.adaptive.ended(u, fmt.Sprintf("never started: needs %d nodes, cluster budget is %d", u.nodes, s.in.NodeBudget))
			for _, p := range u.points {
				s.done = append(s.done, PointOutcome{PointID: p.PointID, WorkflowID: PointWorkflowID(s.in.SweepID, p.PointID),
					Status: point.StatusFailed, Error: fmt.Sprintf("needs %d nodes, cluster budget is %d", p.Nodes, s.in.NodeBudget)})
			}
		}
	}
}

// slimOutcomes drops the point state (the ledger and the point workflow
// keep it) and the derivable workflow ID: what continue-as-new carries.
func slimOutcomes(sweepID string, done []PointOutcome) []PointOutcome {
	out := make([]PointOutcome, len(done))
	for i, d := range done {
		out[i] = PointOutcome{PointID: d.PointID, Status: d.Status, Error: d.Error}
		if d.WorkflowID != PointWorkflowID(sweepID, d.PointID) {
			out[i].WorkflowID = d.WorkflowID
		}
	}
	return out
}

// slimSummary is the sweep's result: counts and, per point, its ID, status,
// eval flag and a failure's error. `starter status` reads the full rows
// from the progress query, the nightly workflow the IDs and statuses.
func slimSummary(pr SweepProgress) SweepProgress {
	rows := make([]PointProgress, len(pr.Points))
	for i, p := range pr.Points {
		rows[i] = PointProgress{PointID: p.PointID, Status: p.Status, PlansEval: p.PlansEval, EvalOnly: p.EvalOnly}
		if o := p.Outcome; o != nil && o.Error != "" {
			rows[i].Outcome = &PointOutcome{PointID: o.PointID, Status: o.Status, Error: o.Error}
		}
	}
	pr.Points = rows
	return pr
}
