package temporalx

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/internal/testnet"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// marker builds a MarkerRecorded event with payloads as the SDK writes them.
func marker(t *testing.T, dc converter.DataConverter, name string, details map[string]any) *historypb.HistoryEvent {
	d := map[string]*commonpb.Payloads{}
	for k, v := range details {
		p, err := dc.ToPayloads(v)
		require.NoError(t, err)
		d[k] = p
	}
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: name, Details: d}}}
}

func TestVersionMarker(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	r, ok := VersionMarker(marker(t, dc, "Version", map[string]any{"change-id": "slim-sweep-state", "version": 1}), dc)
	require.True(t, ok)
	require.Equal(t, Revision{ChangeID: "slim-sweep-state", Version: 1}, r)

	_, ok = VersionMarker(marker(t, dc, "SideEffect", map[string]any{"side-effect-id": 1}), dc)
	require.False(t, ok, "another marker")
	_, ok = VersionMarker(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_TIMER_STARTED}, dc)
	require.False(t, ok, "not a marker")
}

// TestOpenRevisionsOnTheDevServer: a running workflow that took a
// GetVersion branch is listed with its change ID; the marker format is the
// SDK's own, read back from a real history.
func TestOpenRevisionsOnTheDevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a dev server")
	}
	wd, _ := os.Getwd()
	bin, own, err := DevServerPath(wd)
	if err != nil || !own {
		prereq.Missingf(t, "%s is not built (found %q, %v); scripts/install-temporal.sh builds it", DevServerBinary, bin, err)
	}
	d := DevServer{Binary: bin, DataDir: t.TempDir(), IP: "127.0.0.1", Port: testnet.FreePort(t), UIPort: testnet.FreePort(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err = d.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, d.Stop()) })
	c, err := client.Dial(client.Options{HostPort: d.Address()})
	require.NoError(t, err)
	defer c.Close()

	versioned := func(ctx workflow.Context) error {
		_ = workflow.GetVersion(ctx, "test-change", workflow.DefaultVersion, 2)
		workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
		return nil
	}
	w := worker.New(c, "revisions-test", worker.Options{})
	w.RegisterWorkflowWithOptions(versioned, workflow.RegisterOptions{Name: "Versioned"})
	require.NoError(t, w.Start())
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "versioned", TaskQueue: "revisions-test"}, "Versioned")
	require.NoError(t, err)
	defer func() { _ = c.SignalWorkflow(ctx, run.GetID(), "", "stop", nil) }()

	var open []OpenWorkflow
	require.Eventually(t, func() bool {
		open, err = OpenRevisions(ctx, c, nil)
		require.NoError(t, err)
		return len(open) == 1 && len(open[0].Revisions) == 1
	}, time.Minute, 200*time.Millisecond, "open workflows: %+v", open)
	assert.Equal(t, "versioned", open[0].WorkflowID)
	assert.Equal(t, "Versioned", open[0].Type)
	assert.Equal(t, []Revision{{ChangeID: "test-change", Version: 2}}, open[0].Revisions)
}
