package plan

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sweepflow/sweepflow/point"
)

// NodeMinuteTimes are the per-stage times a node-minute estimate assumes.
// Perf durations come from each point's matrix row.
type NodeMinuteTimes struct {
	BringUp time.Duration // launch to healthy, also for the eval-mode restart
	Warmup  time.Duration // per point
	Eval    time.Duration // one GSM8K run
}

// Assumed warmup and eval times of a node-minute estimate (`starter bench
// nodeminutes` flags, the canary's choice of its cheapest point).
const (
	DefaultWarmup = 5 * time.Minute
	DefaultEval   = 10 * time.Minute
)

// DefaultNodeMinuteTimes are the default times with a cluster's bring-up
// time.
func DefaultNodeMinuteTimes(bringUp time.Duration) NodeMinuteTimes {
	return NodeMinuteTimes{BringUp: bringUp, Warmup: DefaultWarmup, Eval: DefaultEval}
}

// PointAlone is the node-minutes of one point on an allocation of its own:
// nodes x (bring-up + warmup + perf duration + eval restart + eval), the
// warmup and perf only when it runs perf (not Profile.EvalOnly), the eval
// restart and eval only when it evals. It is the per-point column of
// NodeMinutes (which counts an eval-only point's warmup and perf as well)
// and what a canary sweep weighs its points by.
func (t NodeMinuteTimes) PointAlone(p point.Spec) float64 {
	var m float64
	if !p.Profile.EvalOnly {
		m += t.BringUp.Minutes() + t.Warmup.Minutes() + float64(p.DurationSec)/60
	}
	if p.Eval {
		m += t.BringUp.Minutes() + t.Eval.Minutes()
	}
	return float64(p.Nodes) * m
}

// MarshalJSON writes the times in minutes.
func (t NodeMinuteTimes) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		BringUp float64 `json:"bring-up-minutes"`
		Warmup  float64 `json:"warmup-minutes"`
		Eval    float64 `json:"eval-minutes"`
	}{t.BringUp.Minutes(), t.Warmup.Minutes(), t.Eval.Minutes()})
}

// NodeMinuteGroup is one bring-up group's estimate.
type NodeMinuteGroup struct {
	Group    int     `json:"group"`
	Topology string  `json:"topology"`
	Nodes    int     `json:"nodes"`
	Concs    []int   `json:"concs"`
	Evals    int     `json:"evals"`
	Shared   float64 `json:"shared-node-minutes"`
	PerPoint float64 `json:"per-point-node-minutes"`
}

// NodeMinuteReport compares a plan's node-minutes with one bring-up per
// deployment (shared) against one bring-up per point.
type NodeMinuteReport struct {
	Times  NodeMinuteTimes   `json:"times"`
	Groups []NodeMinuteGroup `json:"groups"`
	// Bring-ups in perf mode and eval-mode restarts, either way.
	SharedPerfBringUps   int `json:"shared-perf-bring-ups"`
	SharedEvalRestarts   int `json:"shared-eval-restarts"`
	PerPointPerfBringUps int `json:"per-point-perf-bring-ups"`
	PerPointEvalRestarts int `json:"per-point-eval-restarts"`
	// Totals in node-minutes; Ratio = PerPoint / Shared; Saved = PerPoint - Shared.
	Shared     float64 `json:"shared-node-minutes"`
	PerPoint   float64 `json:"per-point-node-minutes"`
	Saved      float64 `json:"saved-node-minutes"`
	Ratio      float64 `json:"ratio"`
	SavedShare float64 `json:"saved-share"` // Saved / PerPoint
}

// NodeMinutes estimates the plan's node-minutes: nodes x (bring-up + warmup
// + perf duration from the row + eval restart + eval) per allocation. With
// shared bring-up an allocation is a deployment: one bring-up, every
// point's warmup and perf, one eval restart for the deployment's evals.
// Without it every point is its own allocation.
func NodeMinutes(p *Plan, t NodeMinuteTimes) (NodeMinuteReport, error) {
	if t.BringUp <= 0 {
		return NodeMinuteReport{}, fmt.Errorf("no bring-up time: set bring-up-time in cluster profile %s", p.Cluster.Path)
	}
	if t.Warmup < 0 || t.Eval < 0 {
		return NodeMinuteReport{}, fmt.Errorf("warmup and eval times must not be negative")
	}
	min := func(d time.Duration) float64 { return d.Minutes() }
	rep := NodeMinuteReport{Times: t}
	for _, g := range p.BringUpGroups() {
		ng := NodeMinuteGroup{Group: g.Group, Topology: g.Topology, Nodes: g.Nodes, Concs: g.Concs, Evals: g.Evals}
		shared := min(t.BringUp)
		for _, i := range g.Points {
			pt := p.Points[i]
			if pt.DurationSec <= 0 {
				return NodeMinuteReport{}, fmt.Errorf("point %s: its matrix row has no duration", pt.ID)
			}
			shared += min(t.Warmup) + float64(pt.DurationSec)/60
			rep.PerPointPerfBringUps++
			if pt.Eval {
				shared += min(t.Eval)
				rep.PerPointEvalRestarts++
			}
			ng.PerPoint += t.PointAlone(point.Spec{Nodes: pt.Nodes, DurationSec: pt.DurationSec, Eval: pt.Eval})
		}
		rep.SharedPerfBringUps++
		if g.Evals > 0 {
			shared += min(t.BringUp)
			rep.SharedEvalRestarts++
		}
		ng.Shared = float64(g.Nodes) * shared
		rep.Shared += ng.Shared
		rep.PerPoint += ng.PerPoint
		rep.Groups = append(rep.Groups, ng)
	}
	rep.Saved = rep.PerPoint - rep.Shared
	if rep.Shared > 0 {
		rep.Ratio = rep.PerPoint / rep.Shared
	}
	if rep.PerPoint > 0 {
		rep.SavedShare = rep.Saved / rep.PerPoint
	}
	return rep, nil
}
