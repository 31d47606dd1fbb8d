package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// Tuning shortens timeouts for tests and demos. Zero values keep the
// production defaults of the point package's stage list.
type Tuning struct {
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	RetryInterval    time.Duration `json:"retry_interval,omitempty"`
	MaxAttempts      int32         `json:"max_attempts,omitempty"`
	// OperatorTimeout is how long a point waits for retry|skip|abort before it
	// aborts with teardown.
	OperatorTimeout time.Duration `json:"operator_timeout,omitempty"`
	// NodeHold is how long a point waiting for an operator keeps its
	// allocation before it tears it down (a retry then allocates again).
	// 0 means DefaultNodeHold; a negative value keeps the nodes for the
	// whole wait.
	NodeHold time.Duration `json:"node_hold,omitempty"`
}

// WorkerLossHeartbeat is the heartbeat timeout of every long stage
// (allocate through upload): a worker killed mid-stage misses it, the server
// times the attempt out, and the retry runs on another worker after
// RetryInterval. Worst case kill-to-retry: this plus the retry interval plus
// a poll, under the 10 s the fault matrix asserts (deploy/composetest
// TestFaultMatrix; measured in docs/performance.md, fault recovery). Activities beat every quarter of
// it (activities.heartbeatEvery); the SDK sends at most every 0.8 of it.
// Teardown keeps the stage list's longer timeout: its steps (scancel, kill
// and wait) do not heartbeat.
const WorkerLossHeartbeat = 5 * time.Second

// DefaultRetryInterval is the first retry's backoff (doubling per attempt).
const DefaultRetryInterval = 3 * time.Second

// DefaultNodeHold is the node hold of a point waiting for an operator.
const DefaultNodeHold = 15 * time.Minute

// stageLedger covers the small bookkeeping activities (reuse lookup, records).
const stageLedger = point.StageLedger

var nonRetryable = failure.NonRetryable()

// ActivityOptions returns the options for one stage on the cluster's queue:
// the point package's timeouts and retry budget, shortened by Tuning.
func ActivityOptions(stage, taskQueue string, t Tuning) workflow.ActivityOptions {
	d, ok := point.Lookup(stage)
	if !ok {
		panic("workflows: no activity options for stage " + stage)
	}
	hb := d.Heartbeat
	if hb > 0 && stage != point.StageTeardown {
		hb = min(hb, WorkerLossHeartbeat)
	}
	// Tuning only shortens: a longer value would break the recovery bound.
	if hb > 0 && t.HeartbeatTimeout > 0 {
		hb = min(hb, t.HeartbeatTimeout)
	}
	attempts := d.MaxAttempts
	if t.MaxAttempts > 0 && stage != point.StageTeardown && stage != stageLedger {
		attempts = t.MaxAttempts
	}
	interval := t.retryInterval()
	return workflow.ActivityOptions{
		TaskQueue:              taskQueue,
		StartToCloseTimeout:    d.StartToClose,
		ScheduleToCloseTimeout: time.Duration(attempts)*d.StartToClose + time.Hour,
		HeartbeatTimeout:       hb,
		WaitForCancellation:    true,
		Summary:                stage,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        interval,
			BackoffCoefficient:     2,
			MaximumInterval:        20 * interval,
			MaximumAttempts:        attempts,
			NonRetryableErrorTypes: nonRetryable,
		},
	}
}

// retryInterval is the first retry's backoff of every stage.
func (t Tuning) retryInterval() time.Duration {
	if t.RetryInterval > 0 {
		return t.RetryInterval
	}
	return DefaultRetryInterval
}

func (t Tuning) operatorTimeout() time.Duration {
	if t.OperatorTimeout > 0 {
		return t.OperatorTimeout
	}
	return 24 * time.Hour
}

func (t Tuning) nodeHold() time.Duration {
	if t.NodeHold != 0 {
		return t.NodeHold
	}
	return DefaultNodeHold
}
