package temporalx

import (
	"context"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// The SDK records workflow.GetVersion as a marker with these names (its
// wire format, which replay depends on).
const (
	versionMarker   = "Version"
	markerChangeID  = "change-id"
	markerVersionNo = "version"
)

// Revision is one workflow.GetVersion decision a workflow recorded.
type Revision struct {
	ChangeID string `json:"change_id"`
	Version  int    `json:"version"`
}

// OpenWorkflow is a running workflow and the revisions its history holds.
type OpenWorkflow struct {
	WorkflowID string     `json:"workflow_id"`
	RunID      string     `json:"run_id"`
	Type       string     `json:"type"`
	Revisions  []Revision `json:"revisions,omitempty"`
}

// OpenRevisions lists the open workflows of the client's namespace with the
// GetVersion markers in their histories, so an operator can tell whether a
// revision is still in use before its branch is removed (see the workflows
// package comment). Closed histories count too until the namespace's
// retention drops them; this lists the open ones. dc decodes the markers:
// the client's data converter (ClientOptions).
func OpenRevisions(ctx context.Context, c client.Client, dc converter.DataConverter) ([]OpenWorkflow, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var out []OpenWorkflow
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `ExecutionStatus="Running"`, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("listing open workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			w := OpenWorkflow{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Type: e.GetType().GetName()}
			it := c.GetWorkflowHistory(ctx, w.WorkflowID, w.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return nil, fmt.Errorf("history of %s: %w", w.WorkflowID, err)
				}
				if r, ok := VersionMarker(ev, dc); ok && !slices.Contains(w.Revisions, r) {
					w.Revisions = append(w.Revisions, r)
				}
			}
			out = append(out, w)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// VersionMarker reads a GetVersion marker event (ok=false: another event).
func VersionMarker(ev *historypb.HistoryEvent, dc converter.DataConverter) (Revision, bool) {
	m := ev.GetMarkerRecordedEventAttributes()
	if m == nil || m.GetMarkerName() != versionMarker {
		return Revision{}, false
	}
	var r Revision
	if p := m.GetDetails()[markerChangeID]; p != nil {
		_ = dc.FromPayloads(p, &r.ChangeID)
	}
	if p := m.GetDetails()[markerVersionNo]; p != nil {
		_ = dc.FromPayloads(p, &r.Version)
	}
	return r, r.ChangeID != ""
}
