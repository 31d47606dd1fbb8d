package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/inferencex/checklist"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// FastTuning is --fast-retries: short retry intervals and operator timeout
// (demos and tests).
func FastTuning() workflows.Tuning {
	return workflows.Tuning{RetryInterval: time.Second, MaxAttempts: 3, HeartbeatTimeout: 10 * time.Second, OperatorTimeout: 2 * time.Hour}
}

// RecordPlan stores the sweep's plan and the bytes of its input files in
// the ledger, so a rerun needs neither the files nor Temporal history. The
// same plan stored twice (an attaching start) is fine.
func RecordPlan(ctx context.Context, store *results.Store, in *workflows.SweepInput, p *plan.Plan) error {
	files, err := PlanFiles(p)
	if err != nil {
		return err
	}
	return PutPlan(ctx, store, in, files)
}

// PlanFiles reads the bytes of every file the plan read.
func PlanFiles(p *plan.Plan) ([]results.PlanFile, error) {
	files := make([]results.PlanFile, 0, len(p.Inputs))
	for _, i := range p.Inputs {
		files = append(files, results.PlanFile{Path: i.Path, Role: i.Role})
	}
	return results.ReadPlanFiles(files)
}

// PutPlan stores the sweep input as the plan of in.SweepID, with files.
func PutPlan(ctx context.Context, store *results.Store, in *workflows.SweepInput, files []results.PlanFile) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return store.PutSweepPlan(ctx, results.SweepPlan{SweepID: in.SweepID, PlanJSON: data, Files: files})
}

// StoredPlan reads a sweep's plan from the ledger.
func StoredPlan(ctx context.Context, store *results.Store, id string) (*workflows.SweepInput, []results.PlanFile, bool, error) {
	sp, ok, err := store.GetSweepPlan(ctx, id)
	if err != nil || !ok {
		return nil, nil, ok, err
	}
	var in workflows.SweepInput
	if err := json.Unmarshal(sp.PlanJSON, &in); err != nil {
		return nil, nil, false, fmt.Errorf("sweep %s: stored plan: %w", id, err)
	}
	return &in, sp.Files, true, nil
}

// Start starts the sweep workflow; a second start of the same ID while
// it runs attaches to it (USE_EXISTING), and a finished one says so.
func Start(ctx context.Context, c client.Client, in *workflows.SweepInput) (client.WorkflowRun, error) {
	return StartMemo(ctx, c, in, nil)
}

// StartMemo starts the sweep with a memo (the review's waivers).
func StartMemo(ctx context.Context, c client.Client, in *workflows.SweepInput, memo map[string]any) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		Memo:                     memo,
		ID:                       in.SweepID,
		TaskQueue:                temporalx.ControlQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("sweep %s: %d points on %s (%d nodes)", in.Name, len(in.Points), in.Cluster, in.NodeBudget),
		StaticDetails:            Details(in),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.SAKind.ValueSet(temporalx.KindSweep), temporalx.SASweepID.ValueSet(in.SweepID),
			temporalx.SAPointStatus.ValueSet(point.StatusRunning)),
	}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.SweepWorkflow, WorkflowInput(in))
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil, fmt.Errorf("sweep %s already ran; see `starter status %s`, start a new run with `starter rerun %s`, or pass --id", in.SweepID, in.SweepID, in.SweepID)
	}
	if err != nil {
		return nil, fmt.Errorf("starting sweep %s: %w", in.SweepID, err)
	}
	return run, nil
}

// storedPlanPoints is the plan size from which the sweep workflow loads
// its points from the plan stored in the ledger (both start paths store it
// first) instead of carrying them in its start input: ~2.2 KB per point,
// so a 1,000-point input would pass the server's 2 MiB blob limit. The
// worker must then use the same ledger as starter.
const storedPlanPoints = 300

// WorkflowInput is the sweep's start input: the points, or for a large
// plan a reference to the stored plan.
func WorkflowInput(in *workflows.SweepInput) workflows.SweepInput {
	out := *in
	if len(out.Points) >= storedPlanPoints && out.PlanRef == "" {
		out.Points, out.PlanRef = nil, out.SweepID
	}
	return out
}

// detailRows bounds the point table of a sweep's static details.
const detailRows = 100

// Details is the sweep workflow's static details: its file and a table
// of its points.
func Details(in *workflows.SweepInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**sweep file** %s\n\n| point | topology | conc | nodes |\n|---|---|---|---|\n", in.SweepFile)
	for i, p := range in.Points {
		if i == detailRows {
			fmt.Fprintf(&b, "| ... %d more | | | |\n", len(in.Points)-detailRows)
			break
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", p.PointID, p.Topology, p.Conc, p.Nodes)
	}
	if len(in.ReuseFrom) > 0 {
		fmt.Fprintf(&b, "\n**reuses** %s\n", strings.Join(in.ReuseFrom, ", "))
	}
	return b.String()
}

// Link is the Web UI page that lists the sweep's workflows.
func Link(ui, sweepID string) string {
	q := url.QueryEscape(fmt.Sprintf(`SweepID="%s"`, sweepID))
	return strings.TrimRight(ui, "/") + "/namespaces/default/workflows?query=" + q
}

// NextRerunID is <base>-rerun<N> with the first N not taken.
func NextRerunID(ctx context.Context, c client.Client, old string) (string, error) {
	base := old
	if i := strings.LastIndex(old, "-rerun"); i > 0 {
		base = old[:i]
	}
	for n := 1; n < 1000; n++ {
		id := fmt.Sprintf("%s-rerun%d", base, n)
		_, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return id, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("too many reruns of %s", base)
}

// ReviewMemo is what a sweep's memo records of its check: which rules were
// waived and the findings they waived, so an operator sees it in the Web UI.
func ReviewMemo(rep *checklist.Report, allow []string) map[string]any {
	var waived []string
	for _, f := range rep.Findings {
		if f.Allowed {
			waived = append(waived, f.String())
		}
	}
	return map[string]any{"review": map[string]any{"rules": rep.Rules, "allowed": []string(allow), "waived": waived}}
}
