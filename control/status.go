package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sweepflow/sweepflow/adaptive"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// PointView is one row of `starter status`: the sweep's progress row, the
// point's detail as its state holds it, and what status adds (the live
// attempt, every failed attempt, reuse and automatic retries by stage).
type PointView struct {
	workflows.PointProgress
	workflows.PointDetail
	Attempt  int32              `json:"attempt,omitempty"`
	Elapsed  float64            `json:"elapsed_s,omitempty"`
	Activity string             `json:"activity_detail,omitempty"`
	Eval     *point.EvalSummary `json:"eval_result,omitempty"`
	// Failures lists every failed attempt the point met, stage by stage.
	Failures []FailureView `json:"failures,omitempty"`
	// Reason says why a not-started point never started ("canary failed:
	// ...").
	Reason string `json:"reason,omitempty"`
	// Reused lists the stages whose outputs came from an earlier sweep.
	Reused []ReuseView `json:"reused,omitempty"`
	// AutoRetries lists the stages that retried by themselves after their
	// worker or the server was out of reach (heartbeat timeouts).
	AutoRetries []AutoRetryView `json:"auto_retries,omitempty"`
}

// ReuseView is one reused stage: "perf reused from <sweep>".
type ReuseView struct {
	Stage string `json:"stage"`
	Sweep string `json:"sweep"`
	Run   string `json:"run,omitempty"`
}

// AutoRetryView is a stage that started fresh retry budgets by itself.
type AutoRetryView struct {
	Stage   string `json:"stage"`
	Retries int    `json:"retries"`
	Error   string `json:"error,omitempty"`
}

// FailureView is one failed attempt of a point's stage.
type FailureView struct {
	Stage string `json:"stage"`
	failure.Attempt
}

// fromState copies a point's state into its row; the callers keep what
// only one kind of point shows (a finished point's missing outputs, a
// running point's nodes).
func (pv *PointView) fromState(s *workflows.PointState) {
	pv.PointDetail, pv.Eval = s.PointDetail, s.Eval
	pv.Reused, pv.AutoRetries, pv.Failures = nil, nil, nil
	for _, r := range s.Stages {
		for _, f := range r.Failures {
			pv.Failures = append(pv.Failures, FailureView{Stage: r.Stage, Attempt: f})
		}
		if r.Outcome == point.OutcomeReused {
			pv.Reused = append(pv.Reused, ReuseView{Stage: r.Stage, Sweep: r.ReusedFrom, Run: r.ReusedRun})
		}
		if r.AutoRetries > 0 {
			pv.AutoRetries = append(pv.AutoRetries, AutoRetryView{Stage: r.Stage, Retries: r.AutoRetries, Error: r.Error})
		}
	}
}

// SweepView is `starter status` of a sweep (its --json shape).
type SweepView struct {
	SweepID    string         `json:"sweep_id"`
	Name       string         `json:"name"`
	Cluster    string         `json:"cluster"`
	Workflow   string         `json:"workflow_status"`
	NodesInUse int            `json:"nodes_in_use"`
	NodeBudget int            `json:"node_budget"`
	Counts     map[string]int `json:"counts"`
	Points     []PointView    `json:"points"`
	Elapsed    float64        `json:"elapsed_s"`
	// Canaries are a canary sweep's groups: canary point, verdict, why it
	// failed, the points it kept from starting and their node-hours;
	// SavedNodeHours sums those.
	Canaries       []point.Canary `json:"canaries,omitempty"`
	SavedNodeHours float64        `json:"saved_node_hours,omitempty"`
	// Adaptive is each adaptive key's search: its request, deployments and
	// why each stopped, the points it added, an slo's result and the
	// budget spent. Each added point's row carries "added" too.
	Adaptive []adaptive.Key `json:"adaptive,omitempty"`
	closed   bool
}

// Query asks a sweep workflow for its progress.
func Query(ctx context.Context, c client.Client, id string) (*workflows.SweepProgress, error) {
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryProgress)
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", id, err)
	}
	var pr workflows.SweepProgress
	if err := v.Get(&pr); err != nil {
		return nil, err
	}
	return &pr, nil
}

// Collect is a sweep's status: its progress, the live state and pending
// activity of each running point, and whether the workflow closed.
func Collect(ctx context.Context, c client.Client, id string) (*SweepView, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", id, err)
	}
	pr, err := Query(ctx, c, id)
	if err != nil {
		return nil, err
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	v := &SweepView{SweepID: pr.SweepID, Name: pr.Name, Cluster: pr.Cluster, NodesInUse: pr.NodesInUse,
		NodeBudget: pr.NodeBudget, Counts: pr.Counts, Workflow: strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")),
		closed: st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	end := time.Now()
	if !pr.FinishedAt.IsZero() {
		end = pr.FinishedAt
	}
	v.Elapsed = end.Sub(pr.StartedAt).Seconds()
	v.Canaries, v.Adaptive = pr.Canaries, pr.Adaptive
	for _, c := range pr.Canaries {
		v.SavedNodeHours += c.SavedNodeHours
	}
	for _, p := range pr.Points {
		pv := PointView{PointProgress: p, PointDetail: workflows.PointDetail{Stage: p.Status}}
		if p.Outcome != nil && p.Outcome.State != nil {
			s := p.Outcome.State
			pv.fromState(s)
			pv.NodesHeld, pv.Released, pv.Hold = 0, false, false
			if s.FailedStage != "" {
				pv.Stage = s.FailedStage
			}
		} else if p.Outcome != nil && p.Status == point.StatusNotStarted {
			pv.Reason = p.Outcome.Error
		} else if p.Outcome != nil {
			pv.LastError = p.Outcome.Error
		}
		if p.Status == point.StatusRunning {
			livePoint(ctx, c, &pv)
		}
		v.Points = append(v.Points, pv)
	}
	return v, nil
}

// livePoint fills a running point's row from its state query and its
// pending activity (attempt, heartbeat detail such as a Slurm pending reason).
func livePoint(ctx context.Context, c client.Client, pv *PointView) {
	if q, err := c.QueryWorkflow(ctx, pv.WorkflowID, "", workflows.QueryState); err == nil {
		var s workflows.PointState
		if q.Get(&s) == nil {
			pv.fromState(&s)
			pv.Status, pv.Missing = s.Status, nil
			if n := len(s.Stages); n > 0 {
				pv.Elapsed = time.Since(s.Stages[n-1].Started).Seconds()
			}
		}
	}
	desc, err := c.DescribeWorkflowExecution(ctx, pv.WorkflowID, "")
	if err != nil {
		return
	}
	for _, pa := range desc.GetPendingActivities() {
		pv.Attempt = pa.GetAttempt()
		if hb := pa.GetHeartbeatDetails(); hb != nil && len(hb.GetPayloads()) > 0 {
			var s string
			if converter.GetDefaultDataConverter().FromPayload(hb.GetPayloads()[0], &s) == nil {
				pv.Activity = s
			}
		}
		if f := pa.GetLastFailure(); f != nil && pv.LastError == "" {
			pv.LastError = f.GetMessage()
		}
	}
}

// powerCell is a point's joules per output token, starred when simulated,
// or why its power is invalid.
func powerCell(f *energy.Figures) string {
	switch {
	case f == nil:
		return "-"
	case !f.Valid:
		return "power-invalid: " + f.Reason()
	case f.Simulated:
		return fmtFloat(f.JoulesPerOutputToken, 3) + "*"
	}
	return fmtFloat(f.JoulesPerOutputToken, 3)
}

func fmtFloat(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// Print writes the status table of a sweep, with its notes and the
// operator commands for waiting points.
func Print(w io.Writer, v *SweepView) {
	done := 0
	for _, p := range v.Points {
		switch p.Status {
		case point.StatusPending, point.StatusRunning, point.StatusAwaitingOperator:
		default:
			done++
		}
	}
	fmt.Fprintf(w, "sweep %s (%s) on %s: %s, %d/%d points done, %d/%d nodes in use, %s elapsed\n",
		v.SweepID, v.Name, v.Cluster, v.Workflow, done, len(v.Points), v.NodesInUse, v.NodeBudget, (time.Duration(v.Elapsed) * time.Second).Round(time.Second))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tTOPOLOGY\tCONC\tNODES\tSTAGE\tSTATUS\tFAILURE\tATT\tELAPSED\tOUT TOK/S/GPU\tTOK/S/USER\tTTFT P90 MS\tJ/OUT TOK\tGSM8K STRICT/FLEX\t")
	simulated := false
	for _, p := range v.Points {
		att, el := "-", "-"
		if p.Attempt > 0 {
			att = fmt.Sprint(p.Attempt)
		}
		if p.Elapsed > 0 {
			el = (time.Duration(p.Elapsed) * time.Second).Round(time.Second).String()
		}
		out, inter, ttft, joules := "-", "-", "-", "-"
		if p.EvalOnly {
			out = "(eval-only)"
		}
		if p.Perf != nil {
			out, inter, ttft = fmtFloat(p.Perf.OutputTputPerGPU, 1), fmtFloat(p.Perf.Interactivity, 1), fmtFloat(p.Perf.TTFTp90Ms, 0)
			if p.Perf.Simulated {
				out += "*"
				simulated = true
			}
			joules = powerCell(p.Perf.Power)
		}
		ev := "-"
		if p.Eval != nil {
			ev = fmt.Sprintf("%.3f/%.3f", p.Eval.EMStrict, p.Eval.EMFlexible)
			if !p.Eval.Passed {
				ev += " FAIL"
			}
			if p.Eval.Simulated {
				ev += "*"
				simulated = true
			}
		} else if !p.PlansEval {
			ev = "(no eval)"
		}
		fc := "-"
		if p.FailureClass != "" {
			fc = p.FailureClass
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.PointID, p.Topology, p.Conc, nodesCell(p), p.Stage, statusCell(p), fc, att, el, out, inter, ttft, joules, ev)
	}
	tw.Flush()
	if simulated {
		fmt.Fprintln(w, "* simulated: figures come from the sweepflow simulator, not from GPUs")
	}
	for _, p := range v.Points {
		for _, r := range p.Reused {
			run := ""
			if r.Run != "" {
				run = " (run " + r.Run + ")"
			}
			fmt.Fprintf(w, "  %s: %s reused from %s%s\n", p.PointID, r.Stage, r.Sweep, run)
		}
		for _, n := range p.ReuseNotes {
			fmt.Fprintf(w, "  %s: %s\n", p.PointID, n)
		}
		for _, a := range p.AutoRetries {
			fmt.Fprintf(w, "  %s: %s retried by itself %dx after %s (worker or server out of reach)\n", p.PointID, a.Stage, a.Retries, a.Error)
		}
		if p.RecordError != "" {
			fmt.Fprintf(w, "! %s: the ledger still shows an older status: recording it failed: %s\n", p.PointID, p.RecordError)
		}
	}
	PrintCanaries(w, v.Canaries)
	PrintAdaptive(w, v.Adaptive, v.Points)
	for _, p := range v.Points {
		if p.Status == point.StatusAwaitingOperator {
			fmt.Fprintf(w, "! %s waits for an operator at %s: %s\n", p.PointID, p.Stage, p.LastError)
			if p.FailureClass != "" {
				fmt.Fprintf(w, "    failure class %s: %s\n", p.FailureClass, p.FailureExcerpt)
			}
			fmt.Fprintf(w, "    starter retry|skip|abort %s\n", p.WorkflowID)
			switch {
			case p.Released:
				fmt.Fprintf(w, "    its nodes were released while it waited: retry allocates again (retry --hold keeps them at the next gate)\n")
			case p.Hold:
				fmt.Fprintf(w, "    holding its %d nodes for debugging\n", p.NodesHeld)
			case p.NodesHeld == 0:
				fmt.Fprintf(w, "    it holds no nodes\n")
			default:
				fmt.Fprintf(w, "    its %d nodes are released after the node hold; starter hold %s keeps them\n", p.NodesHeld, p.WorkflowID)
			}
		} else if p.Activity != "" && p.Status == point.StatusRunning {
			fmt.Fprintf(w, "  %s: %s\n", p.PointID, p.Activity)
		}
	}
}

// PrintCanaries writes a canary sweep's groups: per image and backend its
// canary and verdict, and for a failed one why and what it saved.
func PrintCanaries(w io.Writer, cs []point.Canary) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, point.CanarySummary(cs))
	for _, c := range cs {
		fmt.Fprintf(w, "  canary %s (%s): %s, %s planned node-hours, %s", c.Image, c.Backend, c.PointID, point.FormatNodeHours(c.NodeHours), c.Verdict)
		switch c.Verdict {
		case point.CanaryPending:
			fmt.Fprintf(w, "; %s of its group wait for it", point.Points(c.Points-1))
		case point.CanaryFailed:
			fmt.Fprintf(w, ": %s; %s not started, %s node-hours saved", c.Reason, point.Points(c.NotStarted), point.FormatNodeHours(c.SavedNodeHours))
		}
		fmt.Fprintln(w)
	}
}

// PrintAdaptive writes each adaptive key's search: its request and budget,
// per deployment where its search stands (an slo's result), and each added
// point with the deployment that served it and why.
func PrintAdaptive(w io.Writer, keys []adaptive.Key, rows []PointView) {
	for _, k := range keys {
		fmt.Fprintf(w, "adaptive %s\n  %d of %d points added", k.Request, len(k.Added), k.Request.MaxPoints)
		if k.Request.MaxNodeHours > 0 {
			fmt.Fprintf(w, ", %.2f of %g node-hours", k.NodeMinutes/60, k.Request.MaxNodeHours)
		} else {
			fmt.Fprintf(w, ", %.2f node-hours", k.NodeMinutes/60)
		}
		fmt.Fprintln(w)
		for _, d := range k.Deployments {
			fmt.Fprintf(w, "  %s\n", d)
		}
		for _, a := range k.Added {
			status := "decided"
			if i := slices.IndexFunc(rows, func(r PointView) bool { return r.PointID == a.PointID }); i >= 0 {
				status = rows[i].Status
			}
			fmt.Fprintf(w, "  + %s c%d (%s): added by %s on %s: %s\n", a.PointID, a.Conc, status, a.Added.Mode, a.Added.Topology, a.Added.Reason)
		}
	}
}

// nodesCell is a live point's allocation against its plan ("0/6" once the
// nodes went back while it waits), else the planned node count.
func nodesCell(p PointView) string {
	if p.Status == point.StatusRunning || p.Status == point.StatusAwaitingOperator {
		return fmt.Sprintf("%d/%d", p.NodesHeld, p.Nodes)
	}
	return fmt.Sprint(p.Nodes)
}

// statusCell names what an incomplete point skipped, that a not-started
// point's canary failed (PrintCanaries says why), and that an adaptive
// search added a point (PrintAdaptive says why).
func statusCell(p PointView) string {
	if p.Status == point.StatusIncomplete && len(p.Skipped) > 0 {
		return p.Status + " (skipped " + strings.Join(p.Skipped, ",") + ")"
	}
	if p.Status == point.StatusNotStarted && strings.HasPrefix(p.Reason, point.NotStartedReason("")) {
		return p.Status + " (canary failed)"
	}
	if p.Added != nil {
		return p.Status + " (added: " + p.Added.Mode + ")"
	}
	return p.Status
}

// ProgressBar is "[###...] done/total" over the sweep's points.
func ProgressBar(v *SweepView, width int) string {
	done := 0
	for _, p := range v.Points {
		switch p.Status {
		case point.StatusPending, point.StatusRunning, point.StatusAwaitingOperator:
		default:
			done++
		}
	}
	n := len(v.Points)
	fill := 0
	if n > 0 {
		fill = done * width / n
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, n)
}

// signature is what must change for a non-terminal watch to print again.
func signature(v *SweepView) string {
	var b strings.Builder
	b.WriteString(v.Workflow)
	for _, p := range v.Points {
		fmt.Fprintf(&b, "|%s:%s:%s", p.PointID, p.Stage, p.Status)
	}
	return b.String()
}

func countsLine(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", c[k], k))
	}
	return strings.Join(parts, ", ")
}

// Watch says how to follow a sweep.
type Watch struct {
	JSON     bool          // a JSON line per change instead of the table
	TTY      bool          // redraw the table with a progress bar
	Interval time.Duration // between refreshes
}

// Watch follows a sweep until its workflow closes, writing to out (and
// transient query errors to errw). On a terminal it redraws the table with
// a progress bar; elsewhere it prints the table when something changed (or
// JSON lines). It fails when the sweep did not complete, or a point did not.
func (o Watch) Watch(c client.Client, id string, out, errw io.Writer) error {
	tty := o.TTY && !o.JSON
	last := ""
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		v, err := Collect(ctx, c, id)
		cancel()
		if err != nil {
			// A busy worker answers queries late; keep watching unless the
			// server keeps failing.
			failures++
			if failures >= 5 {
				return err
			}
			fmt.Fprintf(errw, "watch: %v (retrying)\n", err)
			time.Sleep(o.Interval)
			continue
		}
		failures = 0
		var b strings.Builder
		if o.JSON {
			data, _ := json.Marshal(v)
			b.Write(data)
			b.WriteByte('\n')
		} else {
			Print(&b, v)
		}
		text := b.String()
		switch {
		case tty:
			fmt.Fprint(out, "\033[H\033[2J"+text+ProgressBar(v, 40)+"\n")
		default:
			// Elapsed times change every tick: print when a point's stage or
			// status changed, and at the end.
			if sig := signature(v); sig != last || v.closed {
				fmt.Fprint(out, text)
				if !o.JSON {
					fmt.Fprintln(out, ProgressBar(v, 40))
				}
				last = sig
			}
		}
		if v.closed {
			if v.Workflow != "completed" {
				return fmt.Errorf("sweep %s ended %s", id, v.Workflow)
			}
			// The workflow completes with a summary even when points did not:
			// scripts (and nightly jobs) need to know.
			if bad := len(v.Points) - v.Counts[point.StatusCompleted]; bad > 0 {
				return fmt.Errorf("sweep %s: %d of %d points did not complete (%s)", id, bad, len(v.Points), countsLine(v.Counts))
			}
			return nil
		}
		time.Sleep(o.Interval)
	}
}

// WaitingPoints lists the points of a sweep that wait for an operator.
func WaitingPoints(ctx context.Context, c client.Client, sweepID string) ([]string, error) {
	q := fmt.Sprintf(`SweepID = %q AND SweepflowKind = %q AND PointStatus = %q AND ExecutionStatus = "Running"`,
		sweepID, temporalx.KindPoint, point.StatusAwaitingOperator)
	var ids []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return ids, nil
		}
	}
}

// Decide sends the operator decision to the points ids, or with sweep set
// to every waiting point of that sweep, and writes each point's answer to
// out. It fails when no point waits or any point refused.
func Decide(ctx context.Context, c client.Client, d workflows.Decision, ids []string, sweep string, out io.Writer) error {
	if sweep != "" {
		var err error
		if ids, err = WaitingPoints(ctx, c, sweep); err != nil {
			return err
		}
		if len(ids) == 0 {
			return fmt.Errorf("no point of sweep %s waits for an operator", sweep)
		}
	}
	var errs []error
	for _, id := range ids {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: workflows.UpdateDecide, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{d},
		})
		var msg string
		if err == nil {
			err = h.Get(ctx, &msg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", id, msg)
	}
	return errors.Join(errs...)
}
