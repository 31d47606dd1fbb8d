package loadgen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A requests file read back gives the run's own aggregate again, failures
// and multi-token chunks included; a record whose times were edited gives
// the edited figure, so Recompute really derives rather than copies.
func TestRecomputeFromRequestsFile(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 2 * time.Millisecond, itl: time.Millisecond, tokensPerChunk: 2, fault: func(n int, _ map[string]any) string {
		if n%5 == 0 {
			return "http500"
		}
		return ""
	}})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 3, NumPrompts: 12, NumWarmups: 2, ISL: 20, OSL: 8, TotalGPUs: 2})
	require.NoError(t, err)
	require.Positive(t, res.Aggregate.Failed, "the file must hold failures too")
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	require.NoError(t, res.WriteRequestsJSONL(path))
	warm, meas, err := ReadRequestsJSONL(bytes.NewReader(must(os.ReadFile(path))))
	require.NoError(t, err)
	require.Len(t, warm, 2)
	require.Len(t, meas, 12)
	got := res.Aggregate.Recompute(meas)
	want := res.Aggregate
	assert.Equal(t, want, got)

	// Every request sent 10 ms earlier: median TTFT moves by 10 ms.
	for i := range meas {
		if meas[i].Success {
			meas[i].SendNs -= 10e6
			meas[i].Refinish()
		}
	}
	moved := res.Aggregate.Recompute(meas)
	assert.InDelta(t, want.MedianTTFT+0.010, moved.MedianTTFT, 1e-9)
}
