// Package workers assembles sweepflow's Temporal workers: the control
// worker that runs sweep and point workflows, and the cluster worker that
// runs the stage activities against one cluster backend. The worker binary
// and the integration tests share it.
package workers

import (
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/metrics"
	"github.com/sweepflow/sweepflow/nightly"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// Options chooses what this process serves.
type Options struct {
	ClusterName string
	// TaskQueue is the cluster's activity queue, the profile's task-queue
	// (empty: temporalx.ClusterQueue(ClusterName)).
	TaskQueue string
	// Control serves the workflows; Activities serves the cluster queue.
	Control    bool
	Activities *activities.Activities
	// MaxConcurrentActivities bounds the stages this worker runs at once
	// (0: the SDK default).
	MaxConcurrentActivities int
	// Pollers is the number of workflow-task and of activity-task pollers
	// of each worker (0: DefaultPollers).
	Pollers int
	Logger  *zap.Logger
	// SimStageTime makes every stage last at least this long (simulated
	// clusters; see Config.SimStageTime). 0: off.
	SimStageTime time.Duration
}

// DefaultPollers is the pollers per task kind (the SDK's default is 2).
// Half of the workflow pollers wait on the worker's sticky queue, and each
// spends its round trip inside the server's RecordWorkflowTaskStarted. With
// 8, a third of the sticky workflow tasks found no poller waiting and went
// through the database (the matching service's poll_success_sync metric,
// 1,000 points of `starter bench orchestration`); with 16, 1%, and the
// transition p50 fell by about 15% (docs/performance.md).
const DefaultPollers = 16

func (o Options) pollers() int {
	if o.Pollers > 0 {
		return o.Pollers
	}
	return DefaultPollers
}

// HeartbeatThrottle is the longest the SDK holds back an activity's
// heartbeat before sending it.
const HeartbeatThrottle = time.Second

// Workers are the running Temporal workers of this process.
type Workers struct {
	ws []worker.Worker
}

// Start registers everything and starts polling. Stop drains.
func Start(c client.Client, o Options) (*Workers, error) {
	w := &Workers{}
	if o.Control {
		cw := worker.New(c, temporalx.ControlQueue, worker.Options{
			WorkerStopTimeout:                10 * time.Second,
			DeadlockDetectionTimeout:         5 * time.Second,
			MaxConcurrentWorkflowTaskPollers: o.pollers(),
			Interceptors:                     []interceptor.WorkerInterceptor{metrics.NewInterceptor()},
		})
		workflows.Register(cw)
		// Under its historical name: schedules and histories name it.
		cw.RegisterWorkflowWithOptions(nightly.Workflow, workflow.RegisterOptions{Name: nightly.WorkflowName})
		w.ws = append(w.ws, cw)
	}
	if o.Activities != nil {
		if o.ClusterName == "" {
			return nil, fmt.Errorf("workerapp: cluster name is required to serve activities")
		}
		// Observation only (stage durations, points by status): metrics
		// go to the client's handler, a no-op unless --metrics-addr.
		// Every stage attempt gets its ledger row (AttemptLedger), keyed
		// by this worker's identity: set here, so the ledger and Temporal
		// name the worker alike.
		identity := workerIdentity(o.clusterQueue())
		icpt := []interceptor.WorkerInterceptor{metrics.NewInterceptor(),
			&activities.AttemptLedger{Store: o.Activities.Store, Worker: identity, Logger: o.Activities.Logger}}
		if o.SimStageTime > 0 {
			icpt = append(icpt, &simStageTime{d: o.SimStageTime})
		}
		aw := worker.New(c, o.clusterQueue(), worker.Options{
			Identity:                           identity,
			MaxConcurrentActivityExecutionSize: o.MaxConcurrentActivities,
			MaxConcurrentActivityTaskPollers:   o.pollers(),
			WorkerStopTimeout:                  30 * time.Second,
			// Beats reach the server every second instead of every 0.8 x
			// the heartbeat timeout (the SDK's throttle): with the 5 s
			// timeout of the long stages a busy host still has 4 s of slack,
			// and a dead worker is noticed 4-5 s after it died.
			MaxHeartbeatThrottleInterval: HeartbeatThrottle,
			Interceptors:                 icpt,
		})
		aw.RegisterActivity(o.Activities)
		// The nightly's activities run on the cluster queue of its sweep,
		// against the same ledger and artifact store.
		aw.RegisterActivity(&nightly.Activities{Store: o.Activities.Store, Artifacts: o.Activities.Artifacts,
			StateDir: o.Activities.StateDir, Logger: o.Activities.Logger})
		w.ws = append(w.ws, aw)
	}
	if len(w.ws) == 0 {
		return nil, fmt.Errorf("workerapp: nothing to serve (neither control nor activities)")
	}
	for i, x := range w.ws {
		if err := x.Start(); err != nil {
			for _, s := range w.ws[:i] {
				s.Stop()
			}
			return nil, err
		}
	}
	if o.Logger != nil {
		o.Logger.Info("workers started", zap.Bool("control", o.Control), zap.String("cluster_queue", o.clusterQueue()))
	}
	return w, nil
}

// Stop stops every worker, letting running activities finish within the
// stop timeout.
func (w *Workers) Stop() {
	for _, x := range w.ws {
		x.Stop()
	}
}

// workerIdentity is the SDK's default identity of a worker (pid@host@queue).
func workerIdentity(queue string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%d@%s@%s", os.Getpid(), host, queue)
}

func (o Options) clusterQueue() string {
	if o.TaskQueue != "" {
		return o.TaskQueue
	}
	return temporalx.ClusterQueue(o.ClusterName)
}
