package forecast

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Adaptive is what a sweep's adaptive requests cost at worst: the forecast
// of the sweep with every key's budget spent (point.Adaptive.WorstCase:
// each added point on the key's largest deployment, while its server is
// up) set against the same sweep without added points. No added point
// brings a server up, so they add warmup and perf time only.
type Adaptive struct {
	Keys []AdaptiveKey `json:"keys"`
	// What the added points add: node-hours, and how much later the sweep
	// ends.
	ExtraPoints    int     `json:"extra_points"`
	ExtraNodeHours float64 `json:"extra_node_hours"`
	ExtraBringUps  int     `json:"extra_bring_ups"`
	DelayHours     float64 `json:"delay_hours"`
}

// AdaptiveKey is one key's worst case.
type AdaptiveKey struct {
	ConfigKey string `json:"config_key"`
	Mode      string `json:"mode"`
	// Topology is the deployment the worst case puts the points on.
	Topology  string  `json:"topology"`
	Points    int     `json:"points"`
	NodeHours float64 `json:"node_hours"`
}

// CompareAdaptive sets worst, the forecast of a sweep whose adaptive
// requests spend their whole budget, against plain, the same sweep without
// them, and returns worst with the comparison as its Adaptive: the
// forecast shows the worst case.
func CompareAdaptive(plain, worst *Cluster) *Cluster {
	if worst.Timeline == nil {
		return worst
	}
	a := &Adaptive{ExtraNodeHours: worst.NodeHours - plain.NodeHours, ExtraBringUps: worst.BringUps - plain.BringUps,
		DelayHours: worst.MakespanHours - plain.MakespanHours}
	seen := map[string]bool{}
	for _, e := range worst.Timeline.Events {
		p := e.Point
		if p.Added == nil || e.Kind == "" || e.Kind == KindQueue {
			continue
		}
		i := slices.IndexFunc(a.Keys, func(k AdaptiveKey) bool { return k.ConfigKey == p.ConfigKey })
		if i < 0 {
			a.Keys = append(a.Keys, AdaptiveKey{ConfigKey: p.ConfigKey, Mode: p.Added.Mode, Topology: p.Added.Topology})
			i = len(a.Keys) - 1
		}
		if !seen[p.PointID] {
			seen[p.PointID] = true
			a.Keys[i].Points++
			a.ExtraPoints++
		}
		a.Keys[i].NodeHours += (time.Duration(p.Nodes) * e.End.Sub(e.Start)).Hours()
	}
	worst.Adaptive = a
	return worst
}

// write prints the worst case of the adaptive points.
func (a *Adaptive) write(out io.Writer) {
	if a == nil {
		return
	}
	fmt.Fprintf(out, "  adaptive points at worst (every budget spent; the figures above include them): +%d points, +%.1f node-hours, +%d bring-ups, makespan +%s\n",
		a.ExtraPoints, a.ExtraNodeHours, a.ExtraBringUps, hm(a.DelayHours))
	for _, k := range a.Keys {
		fmt.Fprintf(out, "    %s (%s): %d points on %s, %.1f node-hours\n", k.ConfigKey, k.Mode, k.Points, k.Topology, k.NodeHours)
	}
}
