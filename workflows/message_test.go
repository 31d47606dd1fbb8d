package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// The operator gate shows an activity's error once, with its type, however
// the activity wrapped its cause.
func TestRootMessage(t *testing.T) {
	base := errors.New("recipe r.yaml has sha256 49fc, but the point was planned from a9dc")
	// A perf result the validity gate refused, as the perf activity fails
	// with it: the gate shows the reason and evidence `starter bench` prints.
	zero := 0.0
	invalid := point.ValidatePerf(point.PerfSummary{Evidence: &point.PerfEvidence{Client: point.PerfClientLoadgen, Completed: 40,
		OutputTokens: 40, WindowSec: 12, MeanPromptTokens: 921, MeanOutputTokens: 1, ClientLag: &zero, LanesFinished: -1}},
		point.PerfPlan{Scenario: "fixed-seq-len", ISL: 1024, OSL: 1024, RangeRatio: 0.8, Requests: 40})
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"classified: the cause's text is in the message",
			temporal.NewNonRetryableApplicationError("point p: "+base.Error(), "RecipeMismatch", base),
			"point p: recipe r.yaml has sha256 49fc, but the point was planned from a9dc (type: RecipeMismatch, retryable: false)"},
		{"classified after the cause crossed the wire (an ApplicationError cause)",
			temporal.NewApplicationErrorWithCause("engine: 503", "Transient", temporal.NewApplicationError("engine: 503", "Error")),
			"engine: 503 (type: Transient, retryable: true)"},
		{"a cause that adds information is kept",
			temporal.NewApplicationErrorWithCause("bring-up failed", "Transient", errors.New("port 30000 in use")),
			"bring-up failed (type: Transient, retryable: true): port 30000 in use"},
		{"a refused perf result", temporal.NewNonRetryableApplicationError("perf: "+point.Explain(invalid), string(failure.ErrInvalidResult), invalid),
			"perf: invalid perf result: output_tokens: served mean 1.0 outside the requested 819-1024 (±5%); evidence: client loadgen, 40 completed, " +
				"40 output tokens, window 12 s, mean prompt 921.0, output 1.0 tokens, median ITL 0 ms, client lag 0.0% (type: InvalidResult, retryable: false)"},
		{"no type, no cause", temporal.NewApplicationError("planted", ""), "planted"},
		{"heartbeat timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "timeout: Heartbeat"},
		{"plain error", errors.New("boom"), "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, RootMessage(tc.err))
		})
	}
}
