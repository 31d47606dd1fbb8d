package forecast

import (
	"time"

	"github.com/sweepflow/sweepflow/point"
)

// Canary is a sweep's forecast with canaries (`sweep start --canary`: each
// image and backend's cheapest point first, on an allocation of its own,
// and the group's other points only once it passed) set against its
// forecast without them. Both come from the sweep workflow in virtual
// time, with every canary passing.
type Canary struct {
	// Headline: the cluster's figures are those of the sweep with
	// canaries (`forecast --canary`); else those without.
	Headline bool          `json:"headline"`
	Groups   []CanaryGroup `json:"groups"`
	// The sweep with canaries: its node-hours, bring-ups, eval restarts
	// and makespan.
	NodeHours     float64 `json:"node_hours"`
	BringUps      int     `json:"bring_ups"`
	EvalRestarts  int     `json:"eval_restarts"`
	MakespanHours float64 `json:"makespan_hours"`
	// What the canaries add: node-hours, bring-ups and eval restarts (a
	// canary taken out of a deployment brings a server up on its own
	// allocation, and the rest brings up another), and how much later the
	// sweep ends.
	ExtraNodeHours    float64 `json:"extra_node_hours"`
	ExtraBringUps     int     `json:"extra_bring_ups"`
	ExtraEvalRestarts int     `json:"extra_eval_restarts"`
	DelayHours        float64 `json:"delay_hours"`
}

// CanaryGroup is one image and backend's canary in the forecast with
// canaries.
type CanaryGroup struct {
	Image     string `json:"image"`
	Backend   string `json:"backend"`
	PointID   string `json:"point_id"`
	ConfigKey string `json:"config_key"`
	Topology  string `json:"topology"`
	Conc      int    `json:"conc"`
	Nodes     int    `json:"nodes"`
	// Points counts the group's points, the canary included.
	Points int `json:"points"`
	// NodeHours is what the canary holds; StartHours and EndHours are when
	// it runs.
	NodeHours  float64 `json:"node_hours"`
	StartHours float64 `json:"start_hours"`
	EndHours   float64 `json:"end_hours"`
	// SavedNodeHours is what the group's other points hold in the
	// forecast with canaries: what a failed canary does not spend.
	SavedNodeHours float64 `json:"saved_node_hours"`
}

// CompareCanaries sets canary, the forecast of a sweep input with the
// canary groups groups (SweepInput.Canaries), against plain, the forecast
// of the same input without, and returns the one headline says (canary
// when true) with the comparison as its Canary. Node-hours are split by
// group from the stages the canary forecast ran, each by the point it ran
// for: a deployment's shared stages belong to its group, as every point of
// a deployment has one image and backend.
func CompareCanaries(plain, canary *Cluster, groups []point.Canary, headline bool) *Cluster {
	if len(groups) == 0 || canary.Timeline == nil {
		return plain
	}
	cf := &Canary{Headline: headline, NodeHours: canary.NodeHours, BringUps: canary.BringUps, EvalRestarts: canary.EvalRestarts,
		MakespanHours: canary.MakespanHours, ExtraNodeHours: canary.NodeHours - plain.NodeHours,
		ExtraBringUps: canary.BringUps - plain.BringUps, ExtraEvalRestarts: canary.EvalRestarts - plain.EvalRestarts,
		DelayHours: canary.MakespanHours - plain.MakespanHours}
	tl := canary.Timeline
	at := map[string]int{}
	for i, g := range groups {
		at[point.CanaryKey(point.Spec{Image: g.Image, Framework: g.Backend})] = i
		cf.Groups = append(cf.Groups, CanaryGroup{Image: g.Image, Backend: g.Backend, PointID: g.PointID, Points: g.Points})
	}
	canaryTime := make([]time.Duration, len(groups))
	otherTime := make([]time.Duration, len(groups))
	seen := make([]bool, len(groups))
	for _, e := range tl.Events {
		i, ok := at[point.CanaryKey(e.Point)]
		if e.Kind == "" || !ok {
			continue
		}
		g := &cf.Groups[i]
		if e.Point.PointID != g.PointID {
			if e.Kind != KindQueue {
				otherTime[i] += time.Duration(e.Point.Nodes) * e.End.Sub(e.Start)
			}
			continue
		}
		g.ConfigKey, g.Topology, g.Conc, g.Nodes = e.Point.ConfigKey, e.Point.Topology, e.Point.Conc, e.Point.Nodes
		start, end := e.Start.Sub(tl.Start).Hours(), e.End.Sub(tl.Start).Hours()
		if !seen[i] || start < g.StartHours {
			g.StartHours = start
		}
		g.EndHours = max(g.EndHours, end)
		seen[i] = true
		if e.Kind != KindQueue {
			canaryTime[i] += time.Duration(e.Point.Nodes) * e.End.Sub(e.Start)
		}
	}
	for i := range cf.Groups {
		cf.Groups[i].NodeHours, cf.Groups[i].SavedNodeHours = canaryTime[i].Hours(), otherTime[i].Hours()
	}
	out := plain
	if headline {
		out = canary
	}
	out.Canary = cf
	return out
}
