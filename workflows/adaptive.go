package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// Adaptive points. A deployment of a key with an adaptive request
// (SweepInput.Adaptive) runs as a DeploymentWorkflow in adaptive mode: its
// planned perf runs first, every eval waiting for the eval phase, then it
// asks the sweep what to add while its server is still up (SignalAdaptiveAsk,
// with every point it ran). The sweep holds each key's search (package
// adaptive: one decision from the figures of all the key's deployments and
// its budget) and answers with the spec of the point to run next, or stop
// (SignalAdaptiveNext). The added point is an ordinary PointWorkflow on the
// handed-over server; it never brings a server up. After it, the deployment
// asks again; once told to stop it runs its eval phase and tears down.
const (
	SignalAdaptiveAsk  = "adaptive-ask"
	SignalAdaptiveNext = "adaptive-next"
	// changeAdaptive names the revision of the adaptive protocol
	// (workflow.GetVersion): only sweeps with adaptive points record it.
	changeAdaptive = "adaptive-points"
)

// ErrAddedNoServer is the error type of an added point whose deployment's
// server is gone: it never brings one up.
const ErrAddedNoServer = "AddedPointNoServer"

// AdaptiveAsk is a deployment's question to its sweep.
type AdaptiveAsk struct {
	// Workflow is the DeploymentWorkflow's ID, where the answer goes.
	Workflow   string `json:"workflow"`
	Deployment string `json:"deployment"`
	ConfigKey  string `json:"config_key"`
	// Seq numbers the deployment's asks from 1; the answer carries it.
	Seq int `json:"seq"`
	// Points are every point the deployment ran so far, planned and added.
	Points []adaptive.Point `json:"points"`
	// Up: the deployment holds its allocation with the server up; Why
	// says what tore it down otherwise.
	Up  bool   `json:"up"`
	Why string `json:"why,omitempty"`
}

// AdaptiveNext is the sweep's answer: the point to run next, or stop.
type AdaptiveNext struct {
	Seq    int         `json:"seq"`
	Point  *point.Spec `json:"point,omitempty"`
	Reason string      `json:"reason"`
}

// adaptiveRun is the sweep's side: one search per config key.
type adaptiveRun struct {
	keys []*adaptive.Key
	// sweep is the sweep workflow's own ID (asks come here).
	sweep string
}

func newAdaptiveRun(ctx workflow.Context, in SweepInput, pts []point.Spec) *adaptiveRun {
	if len(in.Adaptive) == 0 {
		return nil
	}
	_ = workflow.GetVersion(ctx, changeAdaptive, workflow.DefaultVersion, 1)
	a := &adaptiveRun{sweep: workflow.GetInfo(ctx).WorkflowExecution.ID}
	for _, st := range in.AdaptiveState {
		a.keys = append(a.keys, &st)
	}
	for _, req := range in.Adaptive {
		if a.key(req.ConfigKey) == nil {
			a.keys = append(a.keys, adaptive.NewKey(req))
		}
	}
	a.observe(pts)
	var modes []string
	for _, k := range a.keys {
		if !slices.Contains(modes, k.Request.Mode) {
			modes = append(modes, k.Request.Mode)
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAAdaptive.ValueSet(modes))
	return a
}

func (a *adaptiveRun) key(configKey string) *adaptive.Key {
	if a == nil {
		return nil
	}
	for _, k := range a.keys {
		if k.Request.ConfigKey == configKey {
			return k
		}
	}
	return nil
}

func (a *adaptiveRun) observe(pts []point.Spec) {
	if a == nil {
		return
	}
	for _, k := range a.keys {
		k.Observe(pts, point.Spec.DeploymentKey)
	}
}

// has reports whether a queuedDeployment is a deployment of a key with an adaptive
// request (it then runs as an adaptive DeploymentWorkflow).
func (a *adaptiveRun) has(u queuedDeployment) bool {
	return a != nil && len(u.points) > 0 && a.key(u.points[0].ConfigKey) != nil && !u.canary()
}

// fills reports whether a queuedDeployment belongs to a key with a fill request.
func (a *adaptiveRun) fills(u queuedDeployment) bool {
	k := a.key(queuedKey(u))
	return k != nil && k.Request.Mode == point.AdaptiveFill && !u.canary()
}

func queuedKey(u queuedDeployment) string {
	if len(u.points) == 0 {
		return ""
	}
	return u.points[0].ConfigKey
}

func (u queuedDeployment) canary() bool { return len(u.key) > 7 && u.key[:7] == "canary:" }

func (u queuedDeployment) minConc() int {
	c := 0
	for _, p := range u.points {
		if c == 0 || p.Conc < c {
			c = p.Conc
		}
	}
	return c
}

// weight is what the queue sorts on: a deployment's nodes, or for a deployment
// of a fill key the largest deployment of that key in the queue, so the
// key's deployments come up together, lowest concurrency first: a gap
// between two of them is found while the upper one, whose recipe is sized
// for the concurrencies in between, is still to come.
func (a *adaptiveRun) weight(queue []queuedDeployment) func(queuedDeployment) (int, string, int) {
	largest := map[string]int{}
	if a != nil {
		for _, u := range queue {
			if a.fills(u) {
				largest[queuedKey(u)] = max(largest[queuedKey(u)], u.nodes)
			}
		}
	}
	return func(u queuedDeployment) (int, string, int) {
		if n, ok := largest[queuedKey(u)]; ok && a.fills(u) {
			return n, queuedKey(u), u.minConc()
		}
		return u.nodes, "", 0
	}
}

// serve answers the deployments' asks, one at a time, for the sweep's life.
func (a *adaptiveRun) serve(ctx workflow.Context, s *sweepRun) {
	ch := workflow.GetSignalChannel(ctx, SignalAdaptiveAsk)
	for {
		var ask AdaptiveAsk
		if !ch.Receive(ctx, &ask) {
			return
		}
		next := a.answer(ctx, s, ask)
		if err := workflow.SignalExternalWorkflow(ctx, ask.Workflow, "", SignalAdaptiveNext, next).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("adaptive answer not delivered", "deployment", ask.Workflow, "error", err)
		}
	}
}

// answer decides for one ask and, for an added point, puts it on the
// running queuedDeployment so progress shows it.
func (a *adaptiveRun) answer(ctx workflow.Context, s *sweepRun, ask AdaptiveAsk) AdaptiveNext {
	k := a.key(ask.ConfigKey)
	next := AdaptiveNext{Seq: ask.Seq}
	if k == nil || !k.Has(ask.Deployment) {
		next.Reason = fmt.Sprintf("no adaptive request for %s deployment %s", ask.ConfigKey, ask.Deployment)
		return next
	}
	if ctx.Err() != nil {
		next.Reason = "the sweep is cancelled"
		k.Ended(ask.Deployment, next.Reason)
		return next
	}
	ui := slices.IndexFunc(s.running, func(u queuedDeployment) bool { return u.key == ask.Deployment })
	if ui < 0 {
		next.Reason = "deployment " + ask.Deployment + " is not running"
		return next
	}
	d, err := decide(ctx, k, s.running[ui].points[0], ask)
	if err != nil {
		next.Reason = "adaptive decision failed: " + err.Error()
		k.Ended(ask.Deployment, next.Reason)
		return next
	}
	*k = d.Key
	next.Reason = d.Decision.Reason
	if d.Spec != nil {
		s.running[ui].points = append(s.running[ui].points, *d.Spec)
		s.points = append(s.points, *d.Spec)
		s.planned = nil
		next.Point = d.Spec
	}
	return next
}

// decided is one decision of a key's search as the sweep records it.
type decided struct {
	Key      adaptive.Key      `json:"key"`
	Decision adaptive.Decision `json:"decision"`
	Spec     *point.Spec       `json:"spec,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// decide runs the key's search for an ask and builds the added point's
// spec from a planned point of its deployment (tmpl), recorded as one side
// effect: the search's state after the decision, the decision and the
// spec. A replay takes them from history, so a sweep decided by one
// revision of package adaptive (or of the identity hashes) runs on under
// the next; GetVersion(adaptive-points) guards the protocol itself.
func decide(ctx workflow.Context, k *adaptive.Key, tmpl point.Spec, ask AdaptiveAsk) (decided, error) {
	var d decided
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		next := *k
		next.Deployments = slices.Clone(k.Deployments)
		next.Points, next.Added = slices.Clone(k.Points), slices.Clone(k.Added)
		dec := next.Ask(ask.Deployment, ask.Points, ask.Up, ask.Why)
		out := decided{Key: next, Decision: dec}
		if dec.Conc == 0 {
			return out
		}
		spec, err := tmpl.AtConc(dec.Conc)
		if err != nil {
			return decided{Error: fmt.Sprintf("cannot add c%d: %v", dec.Conc, err)}
		}
		added := dec.Added
		spec.Added = &added
		out.Key.Name(spec.PointID)
		out.Spec = &spec
		return out
	}).Get(&d)
	switch {
	case err != nil:
		return decided{}, err
	case d.Error != "":
		return decided{}, errors.New(d.Error)
	}
	return d, nil
}

// snapshot is every key's search as progress and the ledger show it.
func (a *adaptiveRun) snapshot() []adaptive.Key {
	if a == nil {
		return nil
	}
	out := make([]adaptive.Key, len(a.keys))
	for i, k := range a.keys {
		out[i] = *k
	}
	return out
}

func (a *adaptiveRun) started(u queuedDeployment) {
	if k := a.key(queuedKey(u)); k != nil && a.has(u) {
		k.Started(u.key)
	}
}

func (a *adaptiveRun) ended(u queuedDeployment, why string) {
	if k := a.key(queuedKey(u)); k != nil && a.has(u) {
		k.Ended(u.key, why)
	}
}

// addedRow fills a progress row of an added point the sweep knows only
// from an earlier run's outcomes (after continue-as-new).
func (a *adaptiveRun) addedRow(r *PointProgress) {
	if a == nil {
		return
	}
	for _, k := range a.keys {
		for _, ap := range k.Added {
			if ap.PointID == r.PointID {
				added := ap.Added
				r.ConfigKey, r.Conc, r.Topology, r.Added = k.Request.ConfigKey, ap.Conc, ap.Added.Topology, &added
				return
			}
		}
	}
}

// deploymentSearch is the deployment's side of the search.
type deploymentSearch struct {
	in     DeploymentInput
	gid    string
	seq    int
	points []adaptive.Point
	// why says what tore the server down.
	why string
	// added are the points the search ran here, in order.
	added []point.Spec
}

// report records what a point of the deployment measured.
func (d *deploymentSearch) report(p point.Spec, perf *point.PerfSummary, onServer time.Duration) {
	if d == nil {
		return
	}
	d.points = slices.DeleteFunc(d.points, func(q adaptive.Point) bool { return q.PointID == p.PointID })
	d.points = append(d.points, adaptive.Point{PointID: p.PointID, Deployment: d.in.Key, Conc: p.Conc, Added: p.Added != nil,
		Perf: adaptive.Figures(perf), NodeMinutes: float64(p.Nodes) * onServer.Minutes()})
}

// lost records why the server went down (a point ended without handing
// it over).
func (d *deploymentSearch) lost(out PointOutcome) {
	if d == nil {
		return
	}
	stage := ""
	if out.State != nil {
		stage = out.State.FailedStage
	}
	d.why = fmt.Sprintf("point %s %s", out.PointID, out.Status)
	if stage != "" {
		d.why += " at " + stage
	}
	if out.Error != "" {
		d.why += ": " + out.Error
	}
}

// serverTime is a point's time on its server: its warmup and perf stage
// runs, failed attempts included.
func serverTime(stages []point.StageRun) time.Duration {
	var t time.Duration
	for _, r := range stages {
		if (r.Stage == point.StageWarmup || r.Stage == point.StagePerf) && r.Outcome != point.OutcomeReused && !r.Ended.IsZero() {
			t += r.Ended.Sub(r.Started)
		}
	}
	return t
}

// search asks the sweep for points to add and runs them on the lease until
// told to stop; it returns the lease left for the eval phase.
func (d *deploymentSearch) search(ctx workflow.Context, lease *Lease, outcomes map[string]PointOutcome) *Lease {
	_ = workflow.GetVersion(ctx, changeAdaptive, workflow.DefaultVersion, 1)
	answers := workflow.GetSignalChannel(ctx, SignalAdaptiveNext)
	p0 := d.in.Points[0]
	for ctx.Err() == nil {
		d.seq++
		// Up: a server an added point can measure on as it is (with
		// synthetic acceptance, one started for perf).
		up := lease != nil && lease.Endpoint != nil && (lease.Endpoint.Mode == "perf" || p0.SyntheticAL == 0)
		why := d.why
		if !up && why == "" {
			why = "no server is up (every planned point reused its figures, or none handed its server over)"
		}
		ask := AdaptiveAsk{Workflow: d.gid, Deployment: d.in.Key, ConfigKey: p0.ConfigKey, Seq: d.seq, Points: d.points, Up: up, Why: why}
		if err := workflow.SignalExternalWorkflow(ctx, d.in.Sweep, "", SignalAdaptiveAsk, ask).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("cannot ask the sweep for adaptive points", "deployment", d.in.Key, "error", err)
			return lease
		}
		var next AdaptiveNext
		for next.Seq != d.seq && ctx.Err() == nil {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(answers, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &next) })
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
			sel.Select(ctx)
		}
		if ctx.Err() != nil || next.Point == nil {
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: adaptive search stopped: %s", d.in.Key, next.Reason))
			return lease
		}
		p := *next.Point
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: added point %s c%d on the shared server: %s", d.in.Key, p.Topology, p.Conc, next.Reason))
		role := &DeploymentRole{Workflow: d.gid, Lease: lease, HandBack: true, Added: true}
		fut := startPoint(ctx, d.in.SweepID, p, PointInput{Point: p, TaskQueue: d.in.TaskQueue, Tuning: d.in.Tuning,
			ReuseFrom: d.in.ReuseFrom, Force: d.in.Force, Deployment: role})
		out, st := childOutcome(ctx, p, PointWorkflowID(d.in.SweepID, p.PointID), fut)
		outcomes[p.PointID] = out
		d.added = append(d.added, p)
		lease = nil
		var perf *point.PerfSummary
		var stages []point.StageRun
		if st != nil {
			lease, perf, stages = st.Handoff, st.Perf, st.Stages
		}
		d.report(p, perf, serverTime(stages))
		if lease == nil {
			d.lost(out)
		}
	}
	return lease
}

// addedPoints are the points the search added to the deployment.
func (d *deploymentSearch) addedPoints() []point.Spec {
	if d == nil {
		return nil
	}
	return d.added
}

// addedNoServer is the error of an added point that found no server up.
func addedNoServer(p point.Spec, why string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("added point %s: its deployment's server is not up (%s); an added point never brings one up", p.PointID, cmp.Or(why, "no allocation handed over")),
		ErrAddedNoServer, nil)
}
