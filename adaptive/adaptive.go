// Package adaptive decides a sweep's adaptive points: the concurrencies a
// config key's search adds to a deployment whose server is up, from the
// figures of the points measured so far. It is plain, deterministic code
// (no clock, no map order): the sweep workflow calls it with what its
// deployments report and records what it decided, so a replay decides the
// same.
//
// Two searches:
//   - fill splits the key's latency curve where `starter coverage` finds a
//     gap (package curvegaps: the same rule and factor), on a deployment
//     next to the gap, until no gap is wider than the factor;
//   - slo finds, per deployment, the largest concurrency of a grid whose
//     figure meets an SLO: it brackets from the measured points, then
//     bisects.
//
// Both stop when the key's budget (added points, node-hours) is spent, and
// for a deployment whose server was torn down. An added point never asks
// for a bring-up: a deployment asks only while its server is up.
package adaptive

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/curvegaps"
	"github.com/sweepflow/sweepflow/point"
)

// Deployment states.
const (
	Queued = "queued" // not started yet
	Up     = "up"     // its allocation is held; it has not stopped searching
	Done   = "done"   // it stopped searching (or never searched) and went on
)

// Point is one point a deployment ran, planned or added: its headline
// figures and the node time it held on the server.
type Point struct {
	PointID    string `json:"point_id"`
	Deployment string `json:"deployment"`
	Conc       int    `json:"conc"`
	Added      bool   `json:"added,omitempty"`
	// Perf holds the figures only (no artifact URIs, no evidence); zero
	// when the point has none (it failed, or an operator skipped perf).
	Perf point.PerfSummary `json:"perf"`
	// NodeMinutes is nodes x the point's time on the server (warmup and
	// perf stage runs, failed attempts included).
	NodeMinutes float64 `json:"node_minutes,omitempty"`
}

// Measured reports whether the point has figures.
func (p Point) Measured() bool { return p.Perf.E2ELMedianMs > 0 || p.Perf.Interactivity > 0 }

// Figures is a perf summary's headline figures, without its artifact URIs
// and evidence.
func Figures(s *point.PerfSummary) point.PerfSummary {
	if s == nil {
		return point.PerfSummary{}
	}
	return point.PerfSummary{OutputTputPerGPU: s.OutputTputPerGPU, TputPerGPU: s.TputPerGPU, InputTputPerGPU: s.InputTputPerGPU,
		Interactivity: s.Interactivity, TTFTp90Ms: s.TTFTp90Ms, TTFTp99Ms: s.TTFTp99Ms, TPOTMedianMs: s.TPOTMedianMs,
		E2ELMedianMs: s.E2ELMedianMs, Requests: s.Requests, Failed: s.Failed, Simulated: s.Simulated}
}

// Deployment is one deployment of the key, as the plan and the sweep know it.
type Deployment struct {
	Key      string `json:"deployment"` // its deployment hash (point.Spec.DeploymentKey)
	Topology string `json:"topology"`
	Nodes    int    `json:"nodes"`
	// Concs are its planned concurrencies, in plan order.
	Concs []int `json:"concs"`
	// RecipeConc is the concurrency its recipe claims (0: none): no point
	// is added above it.
	RecipeConc int `json:"recipe_conc,omitempty"`
	// DurationMin is the row's perf duration, the estimate of an added
	// point's time on the server before one ran.
	DurationMin float64 `json:"duration_min,omitempty"`
	// Searched: the request's topology admits it.
	Searched bool   `json:"searched"`
	State    string `json:"state"`
	// Stop says why its search stopped.
	Stop string `json:"stop,omitempty"`
	// Found is an slo search's result on it.
	Found *Found `json:"found,omitempty"`
}

// Found is the result of an slo search on one deployment.
type Found struct {
	// Conc is the largest measured concurrency whose figure meets the
	// SLO (0: none does); Value its figure and Goodput its output
	// throughput per GPU.
	Conc    int     `json:"conc"`
	Value   float64 `json:"value,omitempty"`
	Goodput float64 `json:"goodput,omitempty"`
	// Above is the smallest measured concurrency above Conc that misses
	// the SLO (0: none measured), AboveValue its figure.
	Above      int     `json:"above,omitempty"`
	AboveValue float64 `json:"above_value,omitempty"`
	// Points counts the deployment's measured points the search used.
	Points int `json:"points"`
}

// AddedPoint is one decision of the key's search.
type AddedPoint struct {
	PointID string      `json:"point_id,omitempty"`
	Conc    int         `json:"conc"`
	Added   point.Added `json:"added"`
}

// Decision answers a deployment: the concurrency to add next, or stop.
type Decision struct {
	Conc   int         `json:"conc,omitempty"` // 0: stop
	Reason string      `json:"reason"`
	Added  point.Added `json:"added"`
}

// Key is one config key's search: the request, its deployments in plan
// order, every point they reported, what was added and what it cost.
type Key struct {
	Request     point.Adaptive `json:"request"`
	Deployments []Deployment   `json:"deployments"`
	Points      []Point        `json:"points,omitempty"`
	Added       []AddedPoint   `json:"added_points,omitempty"`
	// NodeMinutes is what the added points held on their servers.
	NodeMinutes float64 `json:"node_minutes,omitempty"`
}

// NewKey starts a key's search.
func NewKey(req point.Adaptive) *Key { return &Key{Request: req} }

// Observe adds the planned points of the key's deployments (in plan
// order; points of other keys are ignored), for plans loaded in pages.
func (k *Key) Observe(pts []point.Spec, deploymentOf func(point.Spec) string) {
	for _, p := range pts {
		if p.ConfigKey != k.Request.ConfigKey || p.Added != nil {
			continue
		}
		key := deploymentOf(p)
		d := k.deployment(key)
		if d == nil {
			k.Deployments = append(k.Deployments, Deployment{Key: key, Topology: p.Topology, Nodes: p.Nodes, State: Queued,
				RecipeConc: p.RecipeConc, DurationMin: float64(p.DurationSec) / 60,
				Searched: k.Request.Topology == "" || k.Request.Topology == p.Topology})
			d = &k.Deployments[len(k.Deployments)-1]
		}
		if !slices.Contains(d.Concs, p.Conc) {
			d.Concs = append(d.Concs, p.Conc)
		}
		d.Nodes = max(d.Nodes, p.Nodes)
	}
}

func (k *Key) deployment(key string) *Deployment {
	for i := range k.Deployments {
		if k.Deployments[i].Key == key {
			return &k.Deployments[i]
		}
	}
	return nil
}

// Has reports whether dep is a deployment of the key.
func (k *Key) Has(dep string) bool { return k.deployment(dep) != nil }

// Started marks a deployment's allocation held.
func (k *Key) Started(dep string) {
	if d := k.deployment(dep); d != nil && d.State == Queued {
		d.State = Up
	}
}

// Ended marks a deployment gone (its workflow ended).
func (k *Key) Ended(dep string, why string) {
	if d := k.deployment(dep); d != nil {
		if d.State != Done && d.Stop == "" && why != "" {
			d.Stop = why
		}
		d.State = Done
	}
}

// Ask is a deployment's question once its planned perf runs are done, and
// after each point the search added to it: points are every point it ran
// so far; up says its server still serves (why says what tore it down).
// Ask merges the points, records the decision and returns it.
func (k *Key) Ask(dep string, points []Point, up bool, why string) Decision {
	d := k.deployment(dep)
	if d == nil {
		return Decision{Reason: fmt.Sprintf("deployment %s is not one of %s's", short(dep), k.Request.ConfigKey)}
	}
	k.merge(dep, points)
	stop := func(reason string) Decision {
		d.State, d.Stop = Done, reason
		return Decision{Reason: reason}
	}
	if d.State == Queued {
		d.State = Up
	}
	if k.Request.Mode == point.AdaptiveSLO && d.Searched {
		d.Found = k.found(d)
	}
	switch {
	case !d.Searched:
		return stop(fmt.Sprintf("not searched: the request names topology %s", k.Request.Topology))
	case !up:
		reason := "server torn down: " + cmp.Or(why, "no allocation left")
		if k.Request.Mode == point.AdaptiveSLO {
			reason += "; " + k.foundText(d)
		}
		return stop(reason)
	}
	if k.Request.WorstCase {
		return k.worstCase(d, stop)
	}
	if reason := k.spent(d); reason != "" {
		if k.Request.Mode == point.AdaptiveSLO {
			reason += "; " + k.foundText(d)
		}
		return stop(reason)
	}
	var dec Decision
	if k.Request.Mode == point.AdaptiveSLO {
		dec = k.nextSLO(d)
	} else {
		dec = k.nextFill(d)
	}
	if dec.Conc == 0 {
		return stop(dec.Reason)
	}
	return dec
}

// Name records the point ID of the latest added point.
func (k *Key) Name(pointID string) {
	if n := len(k.Added); n > 0 {
		k.Added[n-1].PointID = pointID
	}
}

// merge replaces what dep reported before with points and sums the node
// time of the added points.
func (k *Key) merge(dep string, points []Point) {
	k.Points = slices.DeleteFunc(k.Points, func(p Point) bool { return p.Deployment == dep })
	for _, p := range points {
		p.Deployment = dep
		k.Points = append(k.Points, p)
	}
	k.NodeMinutes = 0
	for _, p := range k.Points {
		if p.Added {
			k.NodeMinutes += p.NodeMinutes
		}
	}
}

// spent says why the budget allows no further point on d ("" if it does).
func (k *Key) spent(d *Deployment) string {
	r := k.Request
	if len(k.Added) >= r.MaxPoints {
		return fmt.Sprintf("budget spent: %d of %d added points", len(k.Added), r.MaxPoints)
	}
	if r.MaxNodeHours > 0 {
		next := k.estimate(d)
		if k.NodeMinutes+next > r.MaxNodeHours*60 {
			return fmt.Sprintf("node-hour budget: %.2f of %g node-hours spent, the next point on %s would hold about %.2f",
				k.NodeMinutes/60, r.MaxNodeHours, d.Topology, next/60)
		}
	}
	return ""
}

// estimate is what an added point on d would hold: the most any of its
// points held so far, else nodes x the row's perf duration.
func (k *Key) estimate(d *Deployment) float64 {
	est := 0.0
	for _, p := range k.Points {
		if p.Deployment == d.Key {
			est = max(est, p.NodeMinutes)
		}
	}
	if est == 0 {
		est = float64(d.Nodes) * d.DurationMin
	}
	return est
}

// known reports whether conc is measured on, planned for or added to a
// deployment of the key: any of them when on is nil (a curve has one point
// per concurrency), else that one (an slo search is per deployment).
func (k *Key) known(on *Deployment, conc int) bool {
	of := func(dep string) bool { return on == nil || on.Key == dep }
	for _, p := range k.Points {
		if p.Conc == conc && of(p.Deployment) {
			return true
		}
	}
	for _, a := range k.Added {
		if a.Conc == conc && of(a.Added.Deployment) {
			return true
		}
	}
	for _, d := range k.Deployments {
		if slices.Contains(d.Concs, conc) && of(d.Key) {
			return true
		}
	}
	return false
}

// worstCase is the forecast's search: every added point on the key's
// largest searched deployment until the budget is spent.
func (k *Key) worstCase(d *Deployment, stop func(string) Decision) Decision {
	var worst *Deployment
	for i := range k.Deployments {
		if c := &k.Deployments[i]; c.Searched && (worst == nil || c.Nodes > worst.Nodes) {
			worst = c
		}
	}
	if worst != d {
		return stop(fmt.Sprintf("forecast worst case: the budget goes to %s", worst.Topology))
	}
	if reason := k.spent(d); reason != "" {
		return stop(reason)
	}
	conc := slices.Max(d.Concs)
	for k.known(nil, conc) {
		conc++
	}
	return k.decide(d, conc, "forecast worst case: the budget's points on the key's largest deployment", nil, nil)
}

func (k *Key) decide(d *Deployment, conc int, reason string, gap *point.AddedGap, slo *point.SLO) Decision {
	dec := Decision{Conc: conc, Reason: reason, Added: point.Added{Gap: gap, SLO: slo}}
	dec.Added.Mode, dec.Added.Deployment, dec.Added.Topology = k.Request.Mode, d.Key, d.Topology
	dec.Added.Reason, dec.Added.Seq = reason, len(k.Added)+1
	k.Added = append(k.Added, AddedPoint{Conc: conc, Added: dec.Added})
	return dec
}

// Curve is the key's measured points as curvegaps reads them.
func (k *Key) Curve() curvegaps.Curve {
	c := curvegaps.Curve{Key: k.Request.ConfigKey}
	for _, p := range k.Points {
		if p.Measured() {
			c.Points = append(c.Points, curvegaps.Point{Conc: p.Conc, E2ELSeconds: p.Perf.E2ELMedianMs / 1000, Interactivity: p.Perf.Interactivity})
		}
	}
	return c
}

// Gaps are the gaps `starter coverage --factor` finds on the key's curve.
func (k *Key) Gaps() []curvegaps.Gap {
	res, err := curvegaps.Find([]curvegaps.Curve{k.Curve()}, k.factor())
	if err != nil {
		return nil
	}
	return res.Gaps
}

func (k *Key) factor() float64 { return cmp.Or(k.Request.Factor, curvegaps.DefaultFactor) }

// nextFill picks the next concurrency for d: the widest gap d may serve,
// at the first of the concurrencies `starter coverage` suggests for it
// that d's recipe admits. d may serve a gap next to a point it measured,
// or a gap whose neighbouring deployments have all gone (d is the one that
// came up next). A gap around a concurrency another deployment has yet to
// measure waits for it.
func (k *Key) nextFill(d *Deployment) Decision {
	gaps := k.Gaps()
	if len(gaps) == 0 {
		return Decision{Reason: fmt.Sprintf("no gap wider than x%g left on the curve", k.factor())}
	}
	slices.SortStableFunc(gaps, func(a, b curvegaps.Gap) int { return cmp.Compare(b.Ratio(), a.Ratio()) })
	var why []string
	for _, g := range gaps {
		text := gapText(g)
		if c, ok := k.pending(g); ok {
			why = append(why, fmt.Sprintf("%s waits for c%d, still to be measured", text, c))
			continue
		}
		next, orphan := k.nextTo(g, d.Key)
		if !next && !orphan {
			why = append(why, text+" is next to another deployment that is up")
			continue
		}
		var admitted []int
		for _, c := range g.SuggestConc {
			if !k.known(nil, c) && (d.RecipeConc == 0 || c <= d.RecipeConc) {
				admitted = append(admitted, c)
			}
		}
		if len(admitted) == 0 {
			switch {
			case len(g.SuggestConc) == 0:
				why = append(why, text+": no concurrency in between")
			case d.RecipeConc > 0 && g.SuggestConc[0] > d.RecipeConc:
				why = append(why, fmt.Sprintf("%s: above %s's recipe (sized for c%d)", text, d.Topology, d.RecipeConc))
			default:
				why = append(why, text+": its concurrencies are measured or on their way")
			}
			continue
		}
		reason := fmt.Sprintf("fill: %s, x%.1f > x%g; next to %s, whose server is up", text, g.Ratio(), k.factor(), d.Topology)
		if !next {
			reason = fmt.Sprintf("fill: %s, x%.1f > x%g; the deployments next to it are gone, %s came up next", text, g.Ratio(), k.factor(), d.Topology)
		}
		gap := &point.AddedGap{Metric: g.Metric, FromConc: g.From.Conc, From: g.From.Value, ToConc: g.To.Conc, To: g.To.Value}
		return k.decide(d, admitted[0], reason, gap, nil)
	}
	return Decision{Reason: fmt.Sprintf("%d gap(s) wider than x%g left, none %s may serve: %s", len(gaps), k.factor(), d.Topology, strings.Join(why, "; "))}
}

// pending reports a concurrency inside the gap that a deployment of the
// key plans and has not reported yet.
func (k *Key) pending(g curvegaps.Gap) (int, bool) {
	for _, d := range k.Deployments {
		for _, c := range d.Concs {
			if c > g.From.Conc && c < g.To.Conc && !k.reported(d.Key, c) {
				return c, true
			}
		}
	}
	return 0, false
}

func (k *Key) reported(dep string, conc int) bool {
	return slices.ContainsFunc(k.Points, func(p Point) bool { return p.Deployment == dep && p.Conc == conc })
}

// nextTo reports whether dep measured one of the gap's ends, and whether
// every deployment that measured one has gone (an orphan gap).
func (k *Key) nextTo(g curvegaps.Gap, dep string) (next, orphan bool) {
	orphan = true
	for _, p := range k.Points {
		if !p.Measured() || (p.Conc != g.From.Conc && p.Conc != g.To.Conc) {
			continue
		}
		if p.Deployment == dep {
			next = true
		}
		if o := k.deployment(p.Deployment); o != nil && o.State != Done {
			orphan = false
		}
	}
	return next, orphan && !next
}

func gapText(g curvegaps.Gap) string {
	unit := func(v float64) string {
		if g.Metric == curvegaps.MetricE2EL {
			return fmt.Sprintf("%.3g s", v)
		}
		return fmt.Sprintf("%.4g tok/s/user", v)
	}
	return fmt.Sprintf("gap c%d (%s) -> c%d (%s) of %s", g.From.Conc, unit(g.From.Value), g.To.Conc, unit(g.To.Value), g.Metric)
}

// Grid is the slo search's candidate concurrencies on d, ascending.
func (k *Key) Grid(d *Deployment) []int {
	g := k.Request.Grid
	lo, hi := g.Min, g.Max
	if lo == 0 && len(d.Concs) > 0 {
		lo = slices.Min(d.Concs)
	}
	if hi == 0 {
		hi = d.RecipeConc
		if hi == 0 && len(d.Concs) > 0 {
			hi = slices.Max(d.Concs)
		}
	}
	if d.RecipeConc > 0 {
		hi = min(hi, d.RecipeConc)
	}
	var out []int
	for c := max(lo, 1); c <= hi && g.Step > 0; c += g.Step {
		out = append(out, c)
	}
	return out
}

// sloPoints are d's measured points with the SLO's figure, by concurrency.
func (k *Key) sloPoints(d *Deployment) []Point {
	var out []Point
	for _, p := range k.Points {
		if _, ok := k.Request.SLO.Value(&p.Perf); ok && p.Deployment == d.Key {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b Point) int { return cmp.Compare(a.Conc, b.Conc) })
	return out
}

// found is where the slo search on d stands: the largest measured
// concurrency that meets the SLO and the smallest above it that does not.
func (k *Key) found(d *Deployment) *Found {
	slo := k.Request.SLO
	pts := k.sloPoints(d)
	f := &Found{Points: len(pts)}
	for _, p := range pts {
		if v, _ := slo.Value(&p.Perf); slo.Meets(v) {
			f.Conc, f.Value, f.Goodput = p.Conc, v, p.Perf.OutputTputPerGPU
		}
	}
	for _, p := range pts {
		if v, _ := slo.Value(&p.Perf); p.Conc > f.Conc && !slo.Meets(v) {
			f.Above, f.AboveValue = p.Conc, v
			break
		}
	}
	return f
}

// foundText is an slo result as status prints it.
func (k *Key) foundText(d *Deployment) string {
	f := d.Found
	if f == nil {
		return "no figure measured"
	}
	slo := *k.Request.SLO
	if f.Conc == 0 {
		return fmt.Sprintf("no measured concurrency meets %s", slo)
	}
	s := fmt.Sprintf("c%d is the largest concurrency meeting %s (%s), goodput %.1f tok/s/GPU", f.Conc, slo, valueText(slo.Metric, f.Value), f.Goodput)
	if f.Above > 0 {
		s += fmt.Sprintf("; c%d misses it (%s)", f.Above, valueText(slo.Metric, f.AboveValue))
	}
	return s
}

func valueText(metric string, v float64) string {
	if metric == point.SLOIntvtyMedian {
		return fmt.Sprintf("%.4g tok/s/user", v)
	}
	return fmt.Sprintf("%.3g s", v)
}

// nextSLO brackets, then bisects: with no measured point meeting the SLO
// it probes down (halving, on the grid), with none missing it above the
// best it probes up (doubling), else the grid concurrency nearest the
// middle of the bracket. It stops when the grid has no concurrency left in
// the bracket.
func (k *Key) nextSLO(d *Deployment) Decision {
	slo := *k.Request.SLO
	grid := k.Grid(d)
	f := d.Found
	free := func(c int) bool { return !k.known(d, c) }
	pick := func(target float64, ok func(int) bool) int { // the free grid concurrency nearest target
		best := 0
		for _, c := range grid {
			if ok(c) && free(c) && (best == 0 || math.Abs(float64(c)-target) < math.Abs(float64(best)-target)) {
				best = c
			}
		}
		return best
	}
	probe := func(c int, why string) Decision {
		return k.decide(d, c, fmt.Sprintf("slo %s: %s", slo, why), nil, &slo)
	}
	if len(grid) == 0 {
		return Decision{Reason: "slo: the grid has no concurrency for " + d.Topology + "; " + k.foundText(d)}
	}
	switch {
	case f.Points == 0:
		return Decision{Reason: "slo: no measured point of " + d.Topology + " has the figure " + slo.Metric}
	case f.Conc == 0:
		// Every measured point misses: bracket from below.
		if c := pick(float64(f.Above)/2, func(c int) bool { return c < f.Above }); c > 0 {
			return probe(c, fmt.Sprintf("c%d misses it (%s): bracketing below", f.Above, valueText(slo.Metric, f.AboveValue)))
		}
	case f.Above == 0:
		// Every measured point meets: bracket from above.
		if c := pick(float64(2*f.Conc), func(c int) bool { return c > f.Conc }); c > 0 {
			return probe(c, fmt.Sprintf("c%d meets it (%s): bracketing above", f.Conc, valueText(slo.Metric, f.Value)))
		}
	default:
		if c := pick(float64(f.Conc+f.Above)/2, func(c int) bool { return c > f.Conc && c < f.Above }); c > 0 {
			return probe(c, fmt.Sprintf("bisecting c%d (meets) .. c%d (misses)", f.Conc, f.Above))
		}
	}
	return Decision{Reason: "slo done: " + k.foundText(d)}
}

func short(s string) string { return s[:min(12, len(s))] }

// String is a deployment's search as status prints it.
func (d Deployment) String() string {
	s := fmt.Sprintf("%s (%s): %s", d.Topology, short(d.Key), d.State)
	if d.Stop != "" {
		s += ": " + d.Stop
	}
	return s
}
