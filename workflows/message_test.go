package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// The operator gate shows an activity's error once, with its type, however
// the activity wrapped its cause.
func TestRootMessage(t *testing.T) {
	base := errors.New("recipe r.yaml has sha256 49fc, but the point was planned from a9dc")
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
		{"no type, no cause", temporal.NewApplicationError("planted", ""), "planted"},
		{"heartbeat timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "timeout: Heartbeat"},
		{"plain error", errors.New("boom"), "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, rootMessage(tc.err))
		})
	}
}
