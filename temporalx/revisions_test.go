package temporalx

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
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
