package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
)

// Tuning shortens timeouts for tests and demos. Zero values keep the
// production defaults in stageDefaults.
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

// DefaultNodeHold is the node hold of a point waiting for an operator.
const DefaultNodeHold = 15 * time.Minute

type stageDefault struct {
	startToClose time.Duration
	heartbeat    time.Duration // 0: the stage is short and does not heartbeat
	maxAttempts  int32
}

// stageDefaults is the one place where each stage's timeouts and retry budget
// live. Bring-up allows 4 h of health waiting, as agentic recipes need.
var stageDefaults = map[string]stageDefault{
	activities.StageAllocate:   {startToClose: 6 * time.Hour, heartbeat: 2 * time.Minute, maxAttempts: 3},
	activities.StageCheckpoint: {startToClose: 3 * time.Hour, heartbeat: 2 * time.Minute, maxAttempts: 5},
	activities.StageBringUp:    {startToClose: 4*time.Hour + 30*time.Minute, heartbeat: 2 * time.Minute, maxAttempts: 3},
	activities.StageWarmup:     {startToClose: 45 * time.Minute, heartbeat: time.Minute, maxAttempts: 3},
	activities.StagePerf:       {startToClose: 2 * time.Hour, heartbeat: time.Minute, maxAttempts: 3},
	activities.StageEval:       {startToClose: 2 * time.Hour, heartbeat: time.Minute, maxAttempts: 3},
	activities.StageUpload:     {startToClose: 30 * time.Minute, heartbeat: time.Minute, maxAttempts: 10},
	activities.StageTeardown:   {startToClose: 20 * time.Minute, heartbeat: time.Minute, maxAttempts: 10},
	stageLedger:                {startToClose: 5 * time.Minute, maxAttempts: 10},
}

// stageLedger covers the small bookkeeping activities (reuse lookup, records).
const stageLedger = "ledger"

var nonRetryable = []string{
	activities.ErrBadConfig,
	activities.ErrChecksumMismatch,
	activities.ErrOutOfMemory,
}

// ActivityOptions returns the options for one stage on the cluster's queue.
func ActivityOptions(stage, taskQueue string, t Tuning) workflow.ActivityOptions {
	d, ok := stageDefaults[stage]
	if !ok {
		panic("workflows: no activity options for stage " + stage)
	}
	hb := d.heartbeat
	if hb > 0 && t.HeartbeatTimeout > 0 {
		hb = t.HeartbeatTimeout
	}
	attempts := d.maxAttempts
	if t.MaxAttempts > 0 && stage != activities.StageTeardown && stage != stageLedger {
		attempts = t.MaxAttempts
	}
	interval := 10 * time.Second
	if t.RetryInterval > 0 {
		interval = t.RetryInterval
	}
	return workflow.ActivityOptions{
		TaskQueue:              taskQueue,
		StartToCloseTimeout:    d.startToClose,
		ScheduleToCloseTimeout: time.Duration(attempts)*d.startToClose + time.Hour,
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
