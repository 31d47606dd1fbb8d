package point

import (
	"cmp"
	"fmt"
)

// Canary verdicts.
const (
	CanaryPending = "pending" // the canary has not finished
	CanaryPassed  = "passed"  // it has figures (HasFigures): the group's other points may start
	CanaryFailed  = "failed"  // it has none: the group's other points end not-started
)

// Canary is one canary group of a sweep, the points of one image and
// backend, with the point that runs before all others of the group and,
// once the sweep ran it, its verdict and what its failure saved.
type Canary struct {
	Image   string `json:"image"`
	Backend string `json:"backend"`
	// PointID is the canary: the group's cheapest point (PickCanaries).
	PointID string `json:"point_id"`
	// Points counts the group's points, the canary included.
	Points int `json:"points"`
	// NodeHours is the canary's planned node-hours (Spec.NodeMinutes / 60).
	NodeHours float64 `json:"node_hours"`
	Verdict   string  `json:"verdict"`
	// Reason says why a failed canary failed: its status, stage and error.
	Reason string `json:"reason,omitempty"`
	// NotStarted counts the group's points the sweep did not start because
	// the canary failed; SavedNodeHours sums their planned node-hours.
	NotStarted     int     `json:"not_started,omitempty"`
	SavedNodeHours float64 `json:"saved_node_hours,omitempty"`
}

// CanaryKey is the canary group of a point: its image and backend
// (InferenceX's framework, e.g. dynamo-sglang). One engine launched from one
// image fails alike at every concurrency, so one cheap point tells.
func CanaryKey(p Spec) string { return p.Image + "\x00" + p.Framework }

// NotStartedReason is the reason a point a failed canary held back ends
// with.
func NotStartedReason(canaryReason string) string { return "canary failed: " + canaryReason }

// PickCanaries picks each canary group's canary: among the group's points
// that fit the node budget (all of them when none fits), the one with the
// fewest planned node-minutes (Spec.NodeMinutes: nodes x its time on an
// allocation of its own); a tie goes to the lower concurrency, then to the
// earlier point in the plan. Groups come in the order of their first point.
func PickCanaries(pts []Spec, nodeBudget int) []Canary {
	type group struct {
		c    Canary
		pick *Spec
	}
	var groups []*group
	at := map[string]*group{}
	fits := func(p *Spec) bool { return p.Nodes > 0 && p.Nodes <= nodeBudget }
	better := func(a, b *Spec) bool { // a is the better canary than b
		if fits(a) != fits(b) {
			return fits(a)
		}
		if c := cmp.Compare(a.NodeMinutes, b.NodeMinutes); c != 0 {
			return c < 0
		}
		return a.Conc < b.Conc
	}
	for i := range pts {
		p := &pts[i]
		g, ok := at[CanaryKey(*p)]
		if !ok {
			g = &group{c: Canary{Image: p.Image, Backend: p.Framework, Verdict: CanaryPending}, pick: p}
			at[CanaryKey(*p)] = g
			groups = append(groups, g)
		}
		g.c.Points++
		if better(p, g.pick) {
			g.pick = p
		}
	}
	out := make([]Canary, 0, len(groups))
	for _, g := range groups {
		g.c.PointID, g.c.NodeHours = g.pick.PointID, g.pick.NodeMinutes/60
		out = append(out, g.c)
	}
	return out
}

// CanaryReason is why a canary that ended with status (not one with
// figures) failed: "<point> <status> at <stage>: <error>", as much of it
// as is known.
func CanaryReason(pointID, status, stage, lastError string) string {
	s := pointID + " " + status
	if stage != "" {
		s += " at " + stage
	}
	if lastError != "" {
		s += ": " + lastError
	}
	return s
}

// CanarySummary is one line over a sweep's canaries: how many passed and
// failed, and what the failures saved.
func CanarySummary(cs []Canary) string {
	var passed, failed, pending, notStarted int
	var saved float64
	for _, c := range cs {
		switch c.Verdict {
		case CanaryPassed:
			passed++
		case CanaryFailed:
			failed++
		default:
			pending++
		}
		notStarted += c.NotStarted
		saved += c.SavedNodeHours
	}
	s := fmt.Sprintf("%d canaries: %d passed, %d failed", len(cs), passed, failed)
	if pending > 0 {
		s += fmt.Sprintf(", %d pending", pending)
	}
	if failed > 0 {
		s += fmt.Sprintf("; %s not started, %s node-hours saved", Points(notStarted), FormatNodeHours(saved))
	}
	return s
}

// Points is "1 point" or "N points".
func Points(n int) string {
	if n == 1 {
		return "1 point"
	}
	return fmt.Sprintf("%d points", n)
}

// FormatNodeHours prints node-hours with two decimals (36 s).
func FormatNodeHours(h float64) string { return fmt.Sprintf("%.2f", h) }
