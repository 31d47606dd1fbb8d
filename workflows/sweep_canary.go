package workflows

import (
	"fmt"
	"slices"

	"github.com/sweepflow/sweepflow/point"
)

// canaryRun is a canary sweep's state (SweepInput.Canaries): the groups
// with their verdicts, and indexes into them. A sweep without canaries has
// none, and schedules exactly as it did before canaries existed.
type canaryRun struct {
	groups  []point.Canary
	byKey   map[string]int // point.CanaryKey -> group
	byPoint map[string]int // canary point ID -> group
	// seen is how many of the sweep's outcomes settle has looked at.
	seen int
}

func newCanaryRun(cs []point.Canary) *canaryRun {
	if len(cs) == 0 {
		return nil
	}
	c := &canaryRun{groups: slices.Clone(cs), byKey: map[string]int{}, byPoint: map[string]int{}}
	for i, g := range c.groups {
		c.byKey[point.CanaryKey(point.Spec{Image: g.Image, Framework: g.Backend})] = i
		c.byPoint[g.PointID] = i
	}
	return c
}

// solo reports whether p runs as a queuedDeployment of its own: a canary does, apart
// from the rest of its deployment, which waits for it.
func (c *canaryRun) solo(p point.Spec) bool {
	if c == nil {
		return false
	}
	_, ok := c.byPoint[p.PointID]
	return ok
}

// isCanary: u is a canary's own queued deployment.
func (c *canaryRun) isCanary(u queuedDeployment) bool {
	return len(u.points) == 1 && c.solo(u.points[0])
}

// group is the index of u's canary group, or -1 (no canaries, or a point
// of no group).
func (c *canaryRun) group(u queuedDeployment) int {
	if c == nil || len(u.points) == 0 {
		return -1
	}
	if g, ok := c.byKey[point.CanaryKey(u.points[0])]; ok {
		return g
	}
	return -1
}

// held reports that u waits for its group's canary.
func (s *sweepRun) held(u queuedDeployment) bool {
	g := s.canary.group(u)
	return g >= 0 && s.canary.groups[g].Verdict == point.CanaryPending && !s.canary.isCanary(u)
}

// starved: nothing runs and every queued queuedDeployment waits for a canary that is
// not queued yet (a stored plan's later page holds it).
func (s *sweepRun) starved() bool {
	if s.canary == nil || len(s.running) > 0 {
		return false
	}
	for _, u := range s.queue {
		if !s.held(u) {
			return false
		}
	}
	return true
}

// settle gives each canary that finished its verdict, and ends the queued
// points of every group whose canary failed as not-started, with the
// canary's reason and the node-hours they would have held.
func (s *sweepRun) settle() {
	c := s.canary
	if c == nil {
		return
	}
	for ; c.seen < len(s.done); c.seen++ {
		out := s.done[c.seen]
		g, ok := c.byPoint[out.PointID]
		if !ok || c.groups[g].Verdict != point.CanaryPending {
			continue
		}
		if point.HasFigures(out.Status) {
			c.groups[g].Verdict = point.CanaryPassed
			continue
		}
		stage, msg := "", out.Error
		if st := out.State; st != nil {
			stage = st.FailedStage
			if st.LastError != "" {
				msg = st.LastError
			}
		}
		c.groups[g].Verdict, c.groups[g].Reason = point.CanaryFailed, point.CanaryReason(out.PointID, out.Status, stage, msg)
	}
	// A canary that can no longer come (not in the plan) fails its group
	// instead of holding it for ever.
	if len(s.running) == 0 && !s.morePlan() {
		for g := range c.groups {
			id := c.groups[g].PointID
			if c.groups[g].Verdict == point.CanaryPending && !slices.ContainsFunc(s.queue, func(u queuedDeployment) bool { return c.isCanary(u) && u.points[0].PointID == id }) {
				c.groups[g].Verdict, c.groups[g].Reason = point.CanaryFailed, fmt.Sprintf("canary point %s is not in the sweep's plan", id)
			}
		}
	}
	var keep []queuedDeployment
	for _, u := range s.queue {
		g := c.group(u)
		if g < 0 || c.groups[g].Verdict != point.CanaryFailed {
			keep = append(keep, u)
			continue
		}
		for _, p := range u.points {
			s.done = append(s.done, PointOutcome{PointID: p.PointID, WorkflowID: PointWorkflowID(s.in.SweepID, p.PointID),
				Status: point.StatusNotStarted, Error: point.NotStartedReason(c.groups[g].Reason)})
			c.groups[g].NotStarted++
			c.groups[g].SavedNodeHours += p.NodeMinutes / 60
		}
	}
	if len(keep) != len(s.queue) {
		s.queue = keep
	}
	c.seen = len(s.done)
}

// canaries is the groups as progress and the ledger show them.
func (s *sweepRun) canaries() []point.Canary {
	if s.canary == nil {
		return nil
	}
	return slices.Clone(s.canary.groups)
}
