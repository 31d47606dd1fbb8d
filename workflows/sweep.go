package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// QueryProgress is the sweep workflow's progress query.
const QueryProgress = "progress"

// SweepInput starts (or continues) a sweep.
type SweepInput struct {
	SweepID    string       `json:"sweep_id"` // defaults to the workflow ID (schedules append a timestamp)
	Name       string       `json:"name"`
	Cluster    string       `json:"cluster"`
	TaskQueue  string       `json:"task_queue"` // the cluster's activity queue
	NodeBudget int          `json:"node_budget"`
	Points     []point.Spec `json:"points"`
	Tuning     Tuning       `json:"tuning"`
	ReuseFrom  []string     `json:"reuse_from,omitempty"`
	Force      []string     `json:"force,omitempty"`
	Nightly    bool         `json:"nightly,omitempty"`
	// SweepFile and ClusterFile let `starter rerun --sweep/--cluster`
	// re-plan from files: identities and profiles then decide what is
	// reusable. A plain rerun uses the plan stored in the ledger.
	SweepFile   string `json:"sweep_file,omitempty"`
	ClusterFile string `json:"cluster_file,omitempty"`
	// MaxBypass bounds how often smaller points may start ahead of a blocked
	// larger one, so backfilling never starves a 16-node row.
	MaxBypass int `json:"max_bypass,omitempty"`
	// HistoryLimit is the history length at which the sweep drains its
	// running points and continues as new.
	HistoryLimit int `json:"history_limit,omitempty"`
	// PointsPerRun, when set, also drains and continues as new after this
	// many points started in one run (bounds history for huge sweeps).
	PointsPerRun int `json:"points_per_run,omitempty"`
	// PlanRef, with Points empty, names the sweep whose plan the ledger
	// stores (`starter sweep start` stores it first): the sweep loads its
	// points page by page through an activity as the queue runs low, so
	// neither the start input nor continue-as-new grows with the full
	// point.Spec of every point.
	PlanRef string `json:"plan_ref,omitempty"`
	// Canaries, when set (`starter sweep start --canary`), are the sweep's
	// canary groups, one per image and backend, each with its canary point
	// (point.PickCanaries). Each canary starts before every other point of
	// its group; the others start once it has figures, and end not-started
	// when it has none. Carried across continue-as-new with the verdicts.
	Canaries []point.Canary `json:"canaries,omitempty"`
	// Adaptive are the config keys whose deployments get adaptive points
	// (fill, slo), each with its budget; their deployments run as adaptive
	// DeploymentWorkflows and ask the sweep what to add (adaptive.go).
	Adaptive []point.Adaptive `json:"adaptive,omitempty"`

	// Carried across continue-as-new.
	// AdaptiveState is each adaptive key's search so far.
	AdaptiveState []adaptive.Key `json:"adaptive_state,omitempty"`
	// PlanOffset is where in the stored plan this run starts loading (every
	// point before it has finished; points after it listed in Done are
	// skipped). PlanTotal is the stored plan's length.
	PlanOffset int `json:"plan_offset,omitempty"`
	PlanTotal  int `json:"plan_total,omitempty"`

	// Done is every finished point, slim (ID, status and error: the ledger and the point workflows hold the
	// rest), so it stays small at 10,000 points.
	Done      []PointOutcome `json:"done,omitempty"`
	StartedAt time.Time      `json:"started_at,omitempty"`
	Runs      int            `json:"runs,omitempty"`
}

// PointOutcome is a finished point as the sweep saw it.
type PointOutcome struct {
	PointID string `json:"point_id"`
	// WorkflowID is empty in slim outcomes: it is PointWorkflowID(sweep, point).
	WorkflowID string      `json:"workflow_id,omitempty"`
	Status     string      `json:"status"`
	Error      string      `json:"error,omitempty"`
	State      *PointState `json:"state,omitempty"`
}

// PointProgress is one row of the progress query.
// The sweep's result keeps only the point ID,
// status, eval flags and a failure's error per point: the omitted fields are
// empty there.
type PointProgress struct {
	PointID    string `json:"point_id"`
	WorkflowID string `json:"workflow_id,omitempty"`
	ConfigKey  string `json:"config_key,omitempty"`
	Topology   string `json:"topology,omitempty"`
	Conc       int    `json:"conc,omitempty"`
	Nodes      int    `json:"nodes,omitempty"`
	// PlansEval: the point runs the GSM8K eval.
	PlansEval bool `json:"eval"`
	// EvalOnly: the point runs its eval without perf.
	EvalOnly bool `json:"eval_only,omitempty"`
	// Added: an adaptive search added the point (why, on which deployment).
	Added *point.Added `json:"added,omitempty"`
	// Status is pending/running here, or the final status once done.
	Status  string        `json:"status"`
	Outcome *PointOutcome `json:"outcome,omitempty"`
}

// SweepProgress answers the progress query; the final one is the summary.
type SweepProgress struct {
	SweepID     string          `json:"sweep_id"`
	Name        string          `json:"name"`
	Cluster     string          `json:"cluster"`
	NodeBudget  int             `json:"node_budget"`
	NodesInUse  int             `json:"nodes_in_use"`
	MaxInUse    int             `json:"max_nodes_in_use"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  time.Time       `json:"finished_at,omitempty"`
	Points      []PointProgress `json:"points"`
	Counts      map[string]int  `json:"counts"`
	Runs        int             `json:"runs"`
	ReuseFrom   []string        `json:"reuse_from,omitempty"`
	SweepFile   string          `json:"sweep_file,omitempty"`
	ClusterFile string          `json:"cluster_file,omitempty"`
	// Canaries: a canary sweep's groups, verdicts and saved node-hours.
	Canaries []point.Canary `json:"canaries,omitempty"`
	// Adaptive is each adaptive key's search: its deployments and why each
	// stopped, what was added, an slo's result, the budget spent.
	Adaptive []adaptive.Key `json:"adaptive,omitempty"`
}

// PointWorkflowID is the deterministic ID of a point in a sweep.
func PointWorkflowID(sweepID, pointID string) string { return sweepID + "/" + pointID }

type sweepRun struct {
	in       SweepInput
	acts     *activities.Activities
	queue    []queuedDeployment
	running  []queuedDeployment
	inUse    int
	maxInUse int
	bypassed int
	done     []PointOutcome
	// points are the points this run knows, in plan order: in.Points, or
	// the pages of the stored plan loaded so far (in.PlanRef).
	points []point.Spec
	// planned holds the IDs of points (built by total).
	planned map[string]bool
	// lastProgress is when the progress attribute was last written.
	lastProgress time.Time
	progressSet  bool
	// Stored-plan loading: the next plan offset to load, the plan index of
	// every loaded point, the deployments started in this run and the
	// points finished in earlier runs.
	cursor     int
	index      map[string]int
	startedKey map[string]bool
	finished   map[string]bool
	// canary is the canary state of a canary sweep, else nil.
	canary *canaryRun
	// adaptive holds the adaptive keys' searches, else nil.
	adaptive *adaptiveRun
}

// queuedDeployment is what the sweep schedules on its node budget: the points of one
// deployment, which hold their nodes once and share one bring-up.
type queuedDeployment struct {
	key    string
	points []point.Spec
	nodes  int
}

// sortQueue orders the queue: canaries first (every other point of their
// group waits for them), then the largest deployments, the hardest to place (the
// deployments of a key with adaptive fill together, by the largest of
// them, lowest concurrency first: adaptiveRun.weight).
func (s *sweepRun) sortQueue() {
	weight := s.adaptive.weight(s.queue)
	slices.SortStableFunc(s.queue, func(a, b queuedDeployment) int {
		if ca, cb := s.canary.isCanary(a), s.canary.isCanary(b); ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		if c := fillOrder(weight, a, b); c != 0 {
			return c
		}
		return b.nodes - a.nodes
	})
}

// fillOrder orders two queued deployments by (weight, key, lowest concurrency) when one
// belongs to a fill key; 0 leaves them to the node rule, which is the same
// order for every other queuedDeployment (its weight is its nodes).
func fillOrder(weight func(queuedDeployment) (int, string, int), a, b queuedDeployment) int {
	na, ka, ca := weight(a)
	nb, kb, cb := weight(b)
	if ka == "" && kb == "" {
		return 0
	}
	if na != nb {
		return nb - na
	}
	if ka != kb {
		return strings.Compare(ka, kb)
	}
	return ca - cb
}

// queuedDeployments groups points into the deployments the sweep schedules, in plan order;
// a point solo accepts is a queuedDeployment of its own.
func queuedDeployments(pts []point.Spec, solo func(point.Spec) bool) []queuedDeployment {
	var out []queuedDeployment
	at := map[string]int{}
	for _, p := range pts {
		if solo != nil && solo(p) {
			out = append(out, queuedDeployment{key: "canary:" + p.PointID, points: []point.Spec{p}, nodes: p.Nodes})
			continue
		}
		key := p.DeploymentKey()
		if i, ok := at[key]; ok {
			out[i].points = append(out[i].points, p)
			out[i].nodes = max(out[i].nodes, p.Nodes)
			continue
		}
		at[key] = len(out)
		out = append(out, queuedDeployment{key: key, points: []point.Spec{p}, nodes: p.Nodes})
	}
	return out
}

func flatten(us []queuedDeployment) []point.Spec {
	var out []point.Spec
	for _, u := range us {
		out = append(out, u.points...)
	}
	return out
}

// SweepWorkflow owns a sweep's plan: it starts one PointWorkflow per point
// while the points in flight fit the cluster's node budget, answers the
// progress query and ends with a summary of every point.
func SweepWorkflow(ctx workflow.Context, in SweepInput) (*SweepProgress, error) {
	info := workflow.GetInfo(ctx)
	if in.SweepID == "" {
		in.SweepID = info.WorkflowExecution.ID
	}
	if in.StartedAt.IsZero() {
		in.StartedAt = workflow.Now(ctx)
	}
	if in.MaxBypass == 0 {
		in.MaxBypass = 2
	}
	if in.HistoryLimit == 0 {
		in.HistoryLimit = 8000
	}
	s := &sweepRun{in: in, done: in.Done, points: in.Points, canary: newCanaryRun(in.Canaries)}
	pts := slices.Clone(in.Points)
	for i := range pts {
		pts[i].SweepID = in.SweepID
	}
	if len(in.Adaptive) > 0 && in.PlanRef != "" {
		return nil, temporal.NewNonRetryableApplicationError("sweep input: adaptive points need the plan in the start input, not a stored plan_ref", string(failure.ErrBadConfig), nil)
	}
	s.adaptive = newAdaptiveRun(ctx, in, pts)
	s.queue = queuedDeployments(pts, s.canary.solo)
	s.sortQueue()
	if in.PlanRef != "" {
		if len(in.Points) > 0 {
			return nil, temporal.NewNonRetryableApplicationError("sweep input: plan_ref and points are exclusive", string(failure.ErrBadConfig), nil)
		}
		s.cursor, s.index, s.startedKey, s.finished = in.PlanOffset, map[string]int{}, map[string]bool{}, map[string]bool{}
		for _, d := range in.Done {
			s.finished[d.PointID] = true
		}
		if err := s.loadMore(ctx); err != nil {
			return nil, err
		}
	}

	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (SweepProgress, error) {
		return s.progress(time.Time{}), nil
	}); err != nil {
		return nil, err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAKind.ValueSet(temporalx.KindSweep), temporalx.SASweepID.ValueSet(in.SweepID),
		temporalx.SAPointStatus.ValueSet(point.StatusRunning))
	if in.Runs == 0 {
		s.record(ctx, point.StatusRunning, time.Time{})
	}
	if s.adaptive != nil {
		workflow.Go(ctx, func(gctx workflow.Context) { s.adaptive.serve(gctx, s) })
	}

	s.failUnfit()
	s.settle()

	sel := workflow.NewSelector(ctx)
	pendingFutures, started := 0, 0
	draining := false
	for {
		if ctx.Err() == nil && !draining {
			if err := s.loadMore(ctx); err != nil {
				return nil, err
			}
			for {
				i := s.next()
				if i < 0 {
					break
				}
				s.start(ctx, sel, i)
				pendingFutures++
				started++
				if in.PointsPerRun > 0 && started >= in.PointsPerRun {
					draining = true
					break
				}
			}
		}
		s.publish(ctx)
		if pendingFutures == 0 {
			if (len(s.queue) == 0 && !s.morePlan()) || ctx.Err() != nil {
				break
			}
			if draining {
				// Every running point finished: hand the rest to a fresh run.
				in.Points, in.Done, in.Runs = flatten(s.queue), slimOutcomes(in.SweepID, s.done), in.Runs+1
				in.Canaries = s.canaries()
				in.AdaptiveState = s.adaptive.snapshot()
				if in.PlanRef != "" {
					in.Points, in.PlanOffset, in.PlanTotal = nil, s.resumeOffset(), s.in.PlanTotal
				}
				return nil, workflow.NewContinueAsNewError(ctx, SweepWorkflow, in)
			}
		}
		sel.Select(ctx)
		pendingFutures--
		s.settle()
		if !draining && s.historyFull(workflow.GetInfo(ctx)) {
			draining = true
		}
	}

	status := point.StatusCompleted
	for _, d := range s.done {
		// Eval-failed and incomplete are verdicts on a point, not sweep
		// failures (the counts show them).
		if d.Status != point.StatusCompleted && d.Status != point.StatusEvalFailed && d.Status != point.StatusIncomplete && d.Status != point.StatusSkipped {
			status = point.StatusFailed
		}
	}
	if ctx.Err() != nil {
		status = point.StatusCancelled
		for _, p := range flatten(s.queue) {
			s.done = append(s.done, PointOutcome{PointID: p.PointID, WorkflowID: PointWorkflowID(in.SweepID, p.PointID), Status: point.StatusCancelled})
		}
		s.queue = nil
		// Points of the stored plan never loaded: cancelled too, without rows.
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	end := workflow.Now(dctx)
	_ = workflow.UpsertTypedSearchAttributes(dctx, temporalx.SAPointStatus.ValueSet(status))
	s.record(dctx, status, end)
	summary := slimSummary(s.progress(end))
	if ctx.Err() != nil {
		return &summary, temporal.NewCanceledError(summary)
	}
	return &summary, nil
}

// historyBytesLimit: a sweep run drains and continues as new at
// HistoryLimit events or this many bytes of history, not when the server
// suggests it (at 4 MiB, about 500 points a run: each point's child start
// carries its 2.3 KB input). Every continue-as-new first waits for all
// running points, so the sweep runs below its node budget meanwhile: 9-16 s
// per drain at 64 points in flight in `starter bench orchestration --points
// 1000` (two drains). It stays well under the server's 50 MiB hard limit
// and near its 10 MiB warning: about 900 points a run.
const historyBytesLimit = 8 << 20

// historyFull reports that this run should drain and continue as new.
func (s *sweepRun) historyFull(info *workflow.Info) bool {
	if info.GetCurrentHistoryLength() > s.in.HistoryLimit {
		return true
	}
	return info.GetCurrentHistorySize() > historyBytesLimit
}

// next picks the queue index of the point to start now, or -1. The head
// starts when it fits; a later point may bypass a blocked head at most
// MaxBypass times, after which the sweep waits for the head's nodes.
func (s *sweepRun) next() int {
	free := s.in.NodeBudget - s.inUse
	head := -1
	for i, u := range s.queue {
		// A queuedDeployment that waits for its canary is not in line yet.
		if s.held(u) {
			continue
		}
		if head < 0 {
			head = i
		}
		if u.nodes > free {
			continue
		}
		if i == head {
			s.bypassed = 0
			return i
		}
		if s.bypassed < s.in.MaxBypass {
			s.bypassed++
			return i
		}
		return -1
	}
	return -1
}

func (s *sweepRun) start(ctx workflow.Context, sel workflow.Selector, i int) {
	u := s.queue[i]
	s.queue = slices.Delete(s.queue, i, i+1)
	if s.startedKey != nil {
		s.startedKey[u.key] = true
	}
	s.running = append(s.running, u)
	s.inUse += u.nodes
	s.maxInUse = max(s.maxInUse, s.inUse)
	s.adaptive.started(u)
	// current is the queuedDeployment as it is now: an adaptive search may have added
	// points to it.
	current := func() queuedDeployment {
		if i := slices.IndexFunc(s.running, func(r queuedDeployment) bool { return r.key == u.key }); i >= 0 {
			return s.running[i]
		}
		return u
	}
	finish := func() {
		s.inUse -= u.nodes
		s.running = slices.DeleteFunc(s.running, func(r queuedDeployment) bool { return r.key == u.key })
	}
	searched := s.adaptive.has(u)
	if len(u.points) == 1 && !searched {
		p := u.points[0]
		fut := startPoint(ctx, s.in.SweepID, p, PointInput{
			Point: p, TaskQueue: s.in.TaskQueue, Tuning: s.in.Tuning, ReuseFrom: s.in.ReuseFrom, Force: s.in.Force,
		})
		sel.AddFuture(fut, func(f workflow.Future) {
			out, _ := childOutcome(ctx, p, PointWorkflowID(s.in.SweepID, p.PointID), f)
			s.done = append(s.done, out)
			finish()
		})
		return
	}
	// The points of one deployment: one allocation, one bring-up.
	p0 := u.points[0]
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            DeploymentWorkflowID(s.in.SweepID, u.key),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary: fmt.Sprintf("%s %s: %d points on one allocation (%d nodes)", p0.ConfigKey, p0.Topology,
			len(u.points), u.nodes),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.SAKind.ValueSet(KindDeployment), temporalx.SASweepID.ValueSet(s.in.SweepID), temporalx.SAConfigKey.ValueSet(p0.ConfigKey),
			temporalx.SATopology.ValueSet(p0.Topology)),
	})
	din := DeploymentInput{
		SweepID: s.in.SweepID, Key: u.key, Points: u.points, TaskQueue: s.in.TaskQueue, Tuning: s.in.Tuning,
		ReuseFrom: s.in.ReuseFrom, Force: s.in.Force,
	}
	if searched {
		din.Adaptive, din.Sweep = true, s.adaptive.sweep
	}
	fut := workflow.ExecuteChildWorkflow(cctx, DeploymentWorkflow, din)
	sel.AddFuture(fut, func(f workflow.Future) {
		var outs []PointOutcome
		err := f.Get(ctx, &outs)
		if err != nil {
			var ce *temporal.CanceledError
			if errors.As(err, &ce) && ce.HasDetails() {
				_ = ce.Details(&outs)
			}
		}
		got := map[string]bool{}
		for _, o := range outs {
			if o.PointID != "" {
				got[o.PointID] = true
				s.done = append(s.done, o)
			}
		}
		if err != nil {
			s.adaptive.ended(u, "deployment workflow ended: "+RootMessage(err))
		} else {
			s.adaptive.ended(u, "")
		}
		for _, p := range current().points {
			if got[p.PointID] {
				continue
			}
			out := PointOutcome{PointID: p.PointID, WorkflowID: PointWorkflowID(s.in.SweepID, p.PointID), Status: point.StatusFailed}
			if err != nil {
				out.Error = RootMessage(err)
			}
			if temporal.IsCanceledError(err) || ctx.Err() != nil {
				out.Status = point.StatusCancelled
			}
			s.done = append(s.done, out)
		}
		finish()
	})
}

func (s *sweepRun) removeQueued(key string) {
	s.queue = slices.DeleteFunc(s.queue, func(u queuedDeployment) bool { return u.key == key })
}

func (s *sweepRun) progress(end time.Time) SweepProgress {
	pr := SweepProgress{SweepID: s.in.SweepID, Name: s.in.Name, Cluster: s.in.Cluster, NodeBudget: s.in.NodeBudget,
		NodesInUse: s.inUse, MaxInUse: s.maxInUse, StartedAt: s.in.StartedAt, FinishedAt: end,
		Counts: map[string]int{}, Runs: s.in.Runs, ReuseFrom: s.in.ReuseFrom, SweepFile: s.in.SweepFile, ClusterFile: s.in.ClusterFile,
		Canaries: s.canaries(), Adaptive: s.adaptive.snapshot()}
	row := func(p point.Spec, status string) PointProgress {
		return PointProgress{PointID: p.PointID, WorkflowID: PointWorkflowID(s.in.SweepID, p.PointID), ConfigKey: p.ConfigKey,
			Topology: p.Topology, Conc: p.Conc, Nodes: p.Nodes, PlansEval: p.Eval, EvalOnly: p.Profile.EvalOnly, Status: status, Added: p.Added}
	}
	// The last outcome of every finished point (an index: progress also
	// builds the sweep's summary of 10,000 points).
	doneAt := make(map[string]int, len(s.done))
	for i := range s.done {
		doneAt[s.done[i].PointID] = i
	}
	state := map[string]string{}
	for _, u := range s.running {
		for _, p := range u.points {
			state[p.PointID] = point.StatusRunning
		}
	}
	for _, u := range s.queue {
		for _, p := range u.points {
			state[p.PointID] = point.StatusPending
		}
	}
	// Plan order, so tables read the same from one query to the next.
	for _, p := range s.points {
		var r PointProgress
		if st, ok := state[p.PointID]; ok {
			r = row(p, st)
		} else {
			r = row(p, point.StatusPending)
			if i, ok := doneAt[p.PointID]; ok {
				r.Status, r.Outcome = s.done[i].Status, &s.done[i]
			}
		}
		pr.Counts[r.Status]++
		pr.Points = append(pr.Points, r)
	}
	// Points finished in earlier runs of a continued-as-new sweep.
	planned := s.plannedSet()
	for i := range s.done {
		if !planned[s.done[i].PointID] {
			d := &s.done[i]
			wid := d.WorkflowID
			if wid == "" {
				wid = PointWorkflowID(s.in.SweepID, d.PointID)
			}
			r := PointProgress{PointID: d.PointID, WorkflowID: wid, Status: d.Status, Outcome: d}
			s.adaptive.addedRow(&r)
			pr.Points = append(pr.Points, r)
			pr.Counts[d.Status]++
		}
	}
	// Points of a stored plan not loaded yet (they have no row).
	if rest := s.in.PlanTotal - len(pr.Points); s.in.PlanRef != "" && rest > 0 {
		if end.IsZero() {
			pr.Counts[point.StatusPending] += rest
		} else {
			pr.Counts[point.StatusCancelled] += rest
		}
	}
	return pr
}

// progressAttrEvery: the sweep's progress attribute ("N/M done" in Stage)
// is written when the sweep starts, at most this often after that and when
// the last point is done, not after every point; each write rewrites the
// visibility row. The current details (and `starter watch`, a query) stay
// exact.
const progressAttrEvery = 5 * time.Second

func (s *sweepRun) publish(ctx workflow.Context) {
	// The same total as len(s.progress(...).Points), without building the
	// progress: publish runs after every point, and progress is quadratic
	// in the points (bench orchestration: 26% of the worker's CPU at 1,000
	// points, cubic over the sweep).
	total, finished := s.total(), len(s.done)
	now := workflow.Now(ctx)
	if !s.progressSet || finished >= total || now.Sub(s.lastProgress) >= progressAttrEvery {
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.SAStage.ValueSet(fmt.Sprintf("%d/%d done", finished, total)))
		s.lastProgress, s.progressSet = now, true
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: %d of %d points done, %d running, %d pending; %d/%d nodes in use",
		s.in.SweepID, finished, total, len(s.running), len(s.queue), s.inUse, s.in.NodeBudget))
}

// total counts the points progress shows: this run's plan and the points
// finished in earlier runs of a continued-as-new sweep.
func (s *sweepRun) total() int {
	if s.in.PlanRef != "" {
		return s.in.PlanTotal
	}
	planned := s.plannedSet()
	n := len(s.points)
	for i := range s.done {
		if !planned[s.done[i].PointID] {
			n++
		}
	}
	return n
}

// plannedSet is the set of the IDs of s.points.
func (s *sweepRun) plannedSet() map[string]bool {
	if s.planned == nil {
		s.planned = make(map[string]bool, len(s.points))
		for _, p := range s.points {
			s.planned[p.PointID] = true
		}
	}
	return s.planned
}

func (s *sweepRun) record(ctx workflow.Context, status string, end time.Time) {
	lctx := workflow.WithActivityOptions(ctx, ActivityOptions(stageLedger, s.in.TaskQueue, s.in.Tuning))
	rec := activities.SweepRecord{SweepID: s.in.SweepID, Name: s.in.Name, Status: status, ReuseFrom: s.in.ReuseFrom,
		StartedAt: s.in.StartedAt, FinishedAt: end, Nightly: s.in.Nightly, Canaries: s.canaries(), Adaptive: s.adaptive.snapshot()}
	if err := workflow.ExecuteActivity(lctx, s.acts.RecordSweep, rec).Get(lctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording sweep failed", "sweep", s.in.SweepID, "error", err)
	}
}
